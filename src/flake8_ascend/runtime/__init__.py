"""Runtime tooling of ``ascend-analyse``: instrumented copies (``inject``, ``runtime_copy``) and the hook package
they carry (``msft_dynamic_analysis``, shipped as data)."""
