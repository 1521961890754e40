"""Dynamic-shape tooling of ``ascend-analyse``: the instrumented copy (``inject``), the runtime hook package
(``msft_dynamic_analysis``, shipped as data) and the recompile-log analysis (``recompile``)."""
