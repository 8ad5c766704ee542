"""The runner's side of the evaluator: trusted, never imports torch or the candidate's code.

`sandbox.run_job` starts an evaluation's process tree; `jail` decides and builds the sandbox;
`pool` keeps judges started ahead; `buildcache` keeps owners' compiled builds; `static_report`
reads a source without running it; `ncu` runs Nsight Compute on request.
"""
