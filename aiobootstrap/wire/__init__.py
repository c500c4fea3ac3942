"""The wire format, shared by the server and the client: one face for its modules.

Everything both ends must agree on lives under this folder and nowhere else:
the routes (``routes``), the query grammar (``params``), the request bodies
(``bodies``), the error replies (``errors``), the public result types and
their decoders (``results``) and each kind's routes (``kinds``). Nothing here
does I/O, imports aiohttp or knows the store. On the server's side a malformed
value raises :class:`~aiobootstrap.exceptions.BadRequest` naming the field; on
the client's side a reply the protocol does not allow raises
:class:`~aiobootstrap.exceptions.UnexpectedReply`.
"""

from __future__ import annotations

from .bodies import (
    CLASSIC_BACKEND as CLASSIC_BACKEND,
)
from .bodies import (
    MAX_NESTING as MAX_NESTING,
)
from .bodies import (
    check_world_size as check_world_size,
)
from .bodies import (
    config_body as config_body,
)
from .bodies import (
    engine_info_body as engine_info_body,
)
from .bodies import (
    field_of as field_of,
)
from .bodies import (
    is_classic as is_classic,
)
from .bodies import (
    parse_body as parse_body,
)
from .bodies import (
    parse_engine_info as parse_engine_info,
)
from .bodies import (
    parse_object as parse_object,
)
from .bodies import (
    parse_rank_field as parse_rank_field,
)
from .bodies import (
    parse_role_field as parse_role_field,
)
from .bodies import (
    parse_role_param as parse_role_param,
)
from .bodies import (
    parse_url_body as parse_url_body,
)
from .bodies import (
    url_body as url_body,
)
from .errors import (
    decode_absent as decode_absent,
)
from .errors import (
    decode_not_registered as decode_not_registered,
)
from .errors import (
    encode_not_registered as encode_not_registered,
)
from .errors import (
    error_body as error_body,
)
from .errors import (
    error_detail as error_detail,
)
from .errors import (
    missing_fields as missing_fields,
)
from .kinds import (
    PARALLELISM_CONFIG_ROUTES as PARALLELISM_CONFIG_ROUTES,
)
from .kinds import (
    TRANSFER_ENGINE_INFO_ROUTES as TRANSFER_ENGINE_INFO_ROUTES,
)
from .kinds import (
    KindRoutes as KindRoutes,
)
from .params import (
    FORMS as FORMS,
)
from .params import (
    batch_query as batch_query,
)
from .params import (
    encoder_list_query as encoder_list_query,
)
from .params import (
    format_ranks as format_ranks,
)
from .params import (
    get_query as get_query,
)
from .params import (
    listing_query as listing_query,
)
from .params import (
    parse_after as parse_after,
)
from .params import (
    parse_form as parse_form,
)
from .params import (
    parse_rank_param as parse_rank_param,
)
from .params import (
    parse_ranks as parse_ranks,
)
from .params import (
    parse_seconds as parse_seconds,
)
from .params import (
    parse_wait as parse_wait,
)
from .params import (
    rank_query as rank_query,
)
from .params import (
    record_query as record_query,
)
from .params import (
    records_query as records_query,
)
from .params import (
    role_rank_query as role_rank_query,
)
from .params import (
    split_rank_specs as split_rank_specs,
)
from .params import (
    with_role as with_role,
)
from .results import (
    EncoderUrls as EncoderUrls,
)
from .results import (
    ParallelismConfig as ParallelismConfig,
)
from .results import (
    RankListing as RankListing,
)
from .results import (
    RankSummary as RankSummary,
)
from .results import (
    TransferEngineInfo as TransferEngineInfo,
)
from .results import (
    decode_batch as decode_batch,
)
from .results import (
    decode_config as decode_config,
)
from .results import (
    decode_config_batch as decode_config_batch,
)
from .results import (
    decode_encoder_urls as decode_encoder_urls,
)
from .results import (
    decode_info as decode_info,
)
from .results import (
    decode_listing as decode_listing,
)
from .results import (
    decode_version_header as decode_version_header,
)
from .results import (
    encode_encoder_urls as encode_encoder_urls,
)
from .results import (
    encode_items as encode_items,
)
from .results import (
    missing_in_world as missing_in_world,
)
from .routes import (
    BATCH_PATH as BATCH_PATH,
)
from .routes import (
    BATCH_QUERY_CHARS as BATCH_QUERY_CHARS,
)
from .routes import (
    CONFIG_BATCH_PATH as CONFIG_BATCH_PATH,
)
from .routes import (
    CONFIG_GET_PATH as CONFIG_GET_PATH,
)
from .routes import (
    CONFIG_REGISTER_PATH as CONFIG_REGISTER_PATH,
)
from .routes import (
    ENCODER_LIST_PATH as ENCODER_LIST_PATH,
)
from .routes import (
    ENCODER_REGISTER_PATH as ENCODER_REGISTER_PATH,
)
from .routes import (
    ENCODER_UNREGISTER_PATH as ENCODER_UNREGISTER_PATH,
)
from .routes import (
    GET_PATH as GET_PATH,
)
from .routes import (
    HEALTH_PATH as HEALTH_PATH,
)
from .routes import (
    JSON_TYPE as JSON_TYPE,
)
from .routes import (
    MAX_BATCH_RANKS as MAX_BATCH_RANKS,
)
from .routes import (
    METRICS_PATH as METRICS_PATH,
)
from .routes import (
    MISSING_LIST_MAX as MISSING_LIST_MAX,
)
from .routes import (
    NAMESPACE_PREFIX as NAMESPACE_PREFIX,
)
from .routes import (
    OPENAPI_PATH as OPENAPI_PATH,
)
from .routes import (
    RANKS_PATH as RANKS_PATH,
)
from .routes import (
    READY_PATH as READY_PATH,
)
from .routes import (
    REGISTER_PATH as REGISTER_PATH,
)
from .routes import (
    check_namespace as check_namespace,
)
from .routes import (
    path as path,
)
from .watch import (
    EVENT_STREAM as EVENT_STREAM,
)
from .watch import (
    LAST_EVENT_ID as LAST_EVENT_ID,
)
from .watch import (
    WATCH_PATH as WATCH_PATH,
)
from .watch import (
    WatchedChange as WatchedChange,
)
from .watch import (
    WatchReply as WatchReply,
)
from .watch import (
    decode_watch as decode_watch,
)
from .watch import (
    encode_watch as encode_watch,
)
from .watch import (
    parse_last_event_id as parse_last_event_id,
)
from .watch import (
    sse_event as sse_event,
)
from .watch import (
    watch_query as watch_query,
)
