"""What rules, fixes, the migrated copy and the injector share to recognise torch code: the training loop and its
steps, autocast regions, fused-op patterns, the affinity table, the CUDA rewrites and ``transfer_to_npu``.

Below the rules and above ``semantic/``: nothing here imports a rule, a mode or a front end.
"""
