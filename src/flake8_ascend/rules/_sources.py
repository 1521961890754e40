"""Source citations shared by the advice rules (ASC5xx/ASC6xx); the facts are in rules_data/sources/advice/."""

OFFICIAL_ADVICE = ("msfmktransplt resource/precision_performance_advice.json "
                   "(Ascend-mstt HEAD; same in Ascend/msprobe 81f0042c)")
ADVISOR_RULES = "Ascend-mstt profiler/msprof_analyze/advisor/rules/en/"
ASCEND_API_DOCS = "Ascend/pytorch master docs/zh/api/native_api/"
ADVICE_TABLE = "rules_data/sources/advice/expert_advice.tsv"
