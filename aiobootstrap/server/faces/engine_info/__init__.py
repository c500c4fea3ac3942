"""SGLang's engine-info bootstrap: register, unregister, get and batch get of every per-rank record kind."""
