"""The fast path, one room: replies written as pre-built bytes below ``web.Response``.

``gets`` answers gets (and registrations' ``OK``) from bytes cached per record
version; ``watches`` answers parked watches by crowd; ``batches`` shares a batch
reply between the getters of one set; ``heads`` builds a reply's head as
aiohttp would; ``prebuilt`` holds the reply classes aiohttp reads; ``writes``
writes large bodies a slice at a time. A face asks this room for a reply; it
does not build bytes itself.
"""
