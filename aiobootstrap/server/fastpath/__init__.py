"""The fast path, one room: replies written as pre-built bytes below ``web.Response``.

A face's handler returns what it answers, a typed reply (``replies``: text,
JSON, a record, a batch, a get that waits, a watch, a stream), and the one
responder (``responder``, applied to every face route by
``face.Route.definition``) decides how it is written: pre-built bytes when
``eligible.Eligibility`` allows them, aiohttp's ``web.Response`` of the same
bytes otherwise. A face imports ``replies`` and nothing else of this room:
it builds no bytes, asks no rule, announces and settles no waiter. The rooms:

- ``replies``: the typed replies a handler returns (all a face imports);
- ``responder``: the one place that turns them into bytes or aiohttp's
  reply, and that announces a waiting get or watch before it parks and
  settles it after;
- ``eligible``: the rule, decided once at the app's start and checked per
  request (by the responder alone);
- ``prebuilt``: what every pre-built reply shares: the one ``Stamp``, the
  headers an access log reads (``reply_headers``), the response aiohttp
  reads (``BytesReply``, ``PrebuiltReply``) and the reply written early
  (``PendingReply``);
- ``heads``: a reply's head as aiohttp orders it (variant, stamp);
- ``gets``: gets, registrations' ``OK``, keepalives and the stop's ``503``
  (``GetReplies``); ``watches``: parked watches answered by group
  (``WatchReplies``); ``batches``: a batch reply shared by the getters of
  one set, as parts (a large item is its record's body, never copied);
  ``writes``: large bodies written a slice at a time, views of the one
  shared body; ``turns``: the turns of the loop those slices share, a few
  MiB a turn however many readers.

What each cache holds, its key, and when it is dropped (one policy each):

============  =======================================  ========================  ===================================
cache         holds                                    key                       dropped
============  =======================================  ========================  ===================================
stamp         the ``Date``/``Server``/boot id lines    (second, boot id)         a new second or boot id: made anew
bodies        a get's encoded reply of a record        key (and form=object)     the key's next version replaces it;
                                                                                 the key deleted; a new boot id: all
replies       a whole ``200`` (head and body)          body identity, variant    all when the stamp changes, or at
                                                                                 256 entries
batches       a batch reply (its parts), and the       what was asked            all a second after the first kept;
              versions it was made of (a reply of      (namespace, kind, role,   the oldest at 16 entries
              others is not used)                      ranks, form)
============  =======================================  ========================  ===================================

Nothing else is kept past the step that made it (``turns`` holds only the
writers waiting for a turn): a group's bytes are made per variant for that
group as it is answered, and the events of a change framed once per
answering pass. The subscriptions that feed ``gets`` and
``watches`` (the registry's deliveries, the history's changed namespaces,
the tallies' steps) are made in one place, ``server/app.py``'s start-up.
"""
