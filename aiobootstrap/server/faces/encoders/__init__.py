"""SGLang's encoder registry: the encoder URL routes, the probes that evict dead encoders, the in-process class."""
