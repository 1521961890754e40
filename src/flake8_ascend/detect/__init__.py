"""What rules, fixes, the migrated copy and the injector share to recognise torch code: the training loop and its
steps, autocast regions, fused-op patterns, the affinity table, the CUDA rewrites, ``transfer_to_npu`` and code
that runs once (per request of an inference pipeline, per object, on the way to an error).

Below the rules and above ``semantic/``: nothing here imports a rule, a mode or a front end.
"""
