"""The worker's side: what runs inside the sandbox, in the candidate's own process.

Everything here is the candidate's to read and rewrite, so nothing here decides a verdict or a
number the site stores: `base.Worker` answers the judge's requests, `probe` adds what the judge
asks to catch exploits, `ncu_target` is what Nsight Compute profiles.
"""
