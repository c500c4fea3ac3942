"""SGLang's prefill bootstrap (PD disaggregation): ``/route``, ``/register_dp_rank``, ``/query_dp_ranks``."""
