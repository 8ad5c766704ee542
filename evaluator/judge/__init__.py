"""The judge's side: the trusted process of an evaluation, with torch, outside the sandbox.

It owns the reference, the seeds, every input, the expected outputs and the clock (`clock`),
compares (`compare`, `diagnose`), checks for exploits (`exploits`, `evidence`,
`speed_of_light`), holds the device while timing (`gate`) and runs the reference-only modes
(`validate`). Nothing here runs in the candidate's process.
"""
