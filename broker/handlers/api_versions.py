"""ApiVersions: the APIs and version ranges this broker serves (only registered handlers)."""

from __future__ import annotations

import re

from broker.handlers import handles
from broker.network.request_channel import Request, Response
from broker.services import BrokerServices
from protocol.api_keys import ApiKey
from protocol.errors import Errors
from protocol.exceptions import ProtocolError
from protocol.messages import ApiVersionsResponse

# ApiVersionsRequest.isValid: client software name and version from v3 on.
_SOFTWARE = re.compile(r"^[a-zA-Z0-9](?:[a-zA-Z0-9\-.]*[a-zA-Z0-9])?$")


@handles(ApiKey.API_VERSIONS)
async def handle_api_versions(services: BrokerServices, request: Request) -> Response:
    manager = services.api_version_manager
    low, high = manager.version_range(ApiKey.API_VERSIONS) or (0, 0)
    if not low <= request.api_version <= high:
        # A newer client: answer in v0 so it can read that it must retry with a version we know.
        return Response.send(request, ApiVersionsResponse(
            error_code=int(Errors.UNSUPPORTED_VERSION),
            api_keys=[ApiVersionsResponse.ApiVersion(api_key=int(ApiKey.API_VERSIONS), min_version=low,
                                                     max_version=high)],
        ), version=0)
    try:
        body = request.body()
    except ProtocolError:
        return Response.send(request, ApiVersionsResponse(error_code=int(Errors.INVALID_REQUEST)))
    if request.api_version >= 3 and not (_SOFTWARE.match(body.client_software_name)
                                         and _SOFTWARE.match(body.client_software_version)):
        return Response.send(request, ApiVersionsResponse(error_code=int(Errors.INVALID_REQUEST)))
    return Response.send(request, ApiVersionsResponse(
        error_code=0,
        api_keys=[ApiVersionsResponse.ApiVersion(api_key=int(key), min_version=lo, max_version=hi)
                  for key, lo, hi in manager.enabled_apis()],
    ))
