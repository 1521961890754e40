"""Offline tools of ``ascend-analyse``: they read what a run left behind (tensor dumps, CANN host logs) and
never touch the analysed code: ``dump_compare`` (``compare`` mode), ``recompile`` (``recompile_log`` mode)."""
