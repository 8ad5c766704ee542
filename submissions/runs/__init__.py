"""Model runs: a language model generating kernels for a set of problems, sampled and evaluated.

A room of the submissions app, laid out like a flat app: its models (Model, Run, Generation,
RunSample; registered under the `submissions` label by submissions/models.py), `services`
(creating, steering and stepping runs), `samples` (each sample's result, kept as results land),
`selectors` (reads for the pages, the API and the boards), `importing` (a KernelBench
generations folder as a run), `llm` (prompts and calls through litellm, no database), `api`,
`views`, `urls`, `admin` and the django-q2 `tasks` of the "generation" cluster.
"""
