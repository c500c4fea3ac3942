"""The vLLM face: vLLM's Mooncake connector bootstrap (``/register``, ``/query``; SPEC section 15)."""
