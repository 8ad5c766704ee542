"""The runner's side of the evaluator: trusted, never imports torch, the judge or the worker
(it names their modules to launch them), or the candidate's code.

`sandbox.run_job` starts an evaluation's process tree; `jail` decides and builds the sandbox;
`pool` keeps judges started ahead (their side: evaluator/judge/spare.py); `buildcache` keeps
owners' compiled builds; `ncu` runs Nsight Compute on request.
"""
