"""DescribeAcls, CreateAcls and DeleteAcls (v0-3) over the AclAuthorizer.

The cluster-level checks (DESCRIBE, ALTER) are in ``REQUEST_PERMISSIONS``. Without an authorizer
Kafka answers SECURITY_DISABLED, which is what ``kafka-acls.sh`` reports as "Security features
are disabled". Bindings with UNKNOWN/ANY elements, an empty name, a ``/`` in the name or a
cluster resource not named ``kafka-cluster`` are refused with INVALID_REQUEST, as Kafka does.
"""

from __future__ import annotations

import logging
from typing import Any

from broker.errors import api_error
from broker.handlers import handles
from broker.network.request_channel import Request, Response
from broker.security.authorizer.acl import (
    CLUSTER_NAME,
    AccessControlEntry,
    AccessControlEntryFilter,
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourcePattern,
    ResourcePatternFilter,
    ResourceType,
)
from broker.services import BrokerServices
from protocol.api_keys import ApiKey
from protocol.errors import Errors, KafkaApiError
from protocol.messages import CreateAclsResponse, DeleteAclsResponse, DescribeAclsResponse

log = logging.getLogger(__name__)

NO_AUTHORIZER = "No Authorizer is configured on the broker."


def _filter(entry: Any) -> AclBindingFilter:
    return AclBindingFilter(
        ResourcePatternFilter(ResourceType(entry.resource_type_filter), entry.resource_name_filter,
                              PatternType(entry.pattern_type_filter)),
        AccessControlEntryFilter(entry.principal_filter, entry.host_filter, AclOperation(entry.operation),
                                 AclPermissionType(entry.permission_type)))


def _binding(creation: Any) -> AclBinding:
    """A CreateAcls entry as a binding; KafkaApiError(INVALID_REQUEST) when it cannot be created."""
    try:
        pattern = ResourcePattern(ResourceType(creation.resource_type), creation.resource_name,
                                  PatternType(creation.resource_pattern_type))
        entry = AccessControlEntry(creation.principal, creation.host, AclOperation(creation.operation),
                                   AclPermissionType(creation.permission_type))
    except ValueError:
        raise KafkaApiError(Errors.INVALID_REQUEST, "Failed to create ACL") from None
    if pattern.resource_type is ResourceType.CLUSTER and pattern.name != CLUSTER_NAME:
        raise KafkaApiError(Errors.INVALID_REQUEST, f"The only valid name for the CLUSTER resource is {CLUSTER_NAME}")
    if not pattern.name:
        raise KafkaApiError(Errors.INVALID_REQUEST, "Invalid empty resource name")
    unknown = (pattern.resource_type in (ResourceType.UNKNOWN, ResourceType.ANY)
               or pattern.pattern_type not in (PatternType.LITERAL, PatternType.PREFIXED)
               or entry.operation in (AclOperation.UNKNOWN, AclOperation.ANY)
               or entry.permission_type in (AclPermissionType.UNKNOWN, AclPermissionType.ANY)
               or "/" in pattern.name)
    if unknown:
        raise KafkaApiError(Errors.INVALID_REQUEST, "Failed to create ACL")
    return AclBinding(pattern, entry)


@handles(ApiKey.DESCRIBE_ACLS)
async def handle_describe_acls(services: BrokerServices, request: Request) -> Response:
    authorizer = services.auth.authorizer
    if authorizer is None:
        return Response.send(request, DescribeAclsResponse(error_code=int(Errors.SECURITY_DISABLED),
                                                           error_message=NO_AUTHORIZER.rstrip("."), resources=[]))
    try:
        binding_filter = _filter(request.body())
    except ValueError:
        return Response.send(request, DescribeAclsResponse(error_code=int(Errors.INVALID_REQUEST),
                                                           error_message="Invalid ACL filter", resources=[]))
    by_pattern: dict[ResourcePattern, list[AccessControlEntry]] = {}
    for binding in authorizer.acls(binding_filter):
        by_pattern.setdefault(binding.pattern, []).append(binding.entry)
    Resource = DescribeAclsResponse.DescribeAclsResource
    return Response.send(request, DescribeAclsResponse(error_code=0, error_message=None, resources=[
        Resource(resource_type=int(p.resource_type), resource_name=p.name, pattern_type=int(p.pattern_type),
                 acls=[DescribeAclsResponse.AclDescription(principal=e.principal, host=e.host,
                                                           operation=int(e.operation),
                                                           permission_type=int(e.permission_type))
                       for e in entries])
        for p, entries in by_pattern.items()]))


def create_acls_error(request: Request, error: Errors) -> Any:
    return CreateAclsResponse(results=[CreateAclsResponse.AclCreationResult(error_code=int(error))
                                       for _ in request.body().creations])


@handles(ApiKey.CREATE_ACLS, error_response=create_acls_error)
async def handle_create_acls(services: BrokerServices, request: Request) -> Response:
    authorizer = services.auth.authorizer
    creations = request.body().creations
    Result = CreateAclsResponse.AclCreationResult
    if authorizer is None:
        return Response.send(request, CreateAclsResponse(results=[
            Result(error_code=int(Errors.SECURITY_DISABLED), error_message=NO_AUTHORIZER) for _ in creations]))
    results: list[Any] = [None] * len(creations)
    valid: list[tuple[int, AclBinding]] = []
    for index, creation in enumerate(creations):
        try:
            valid.append((index, _binding(creation)))
        except KafkaApiError as exc:
            results[index] = Result(error_code=int(exc.error), error_message=exc.message)
    outcomes = await services.pool.run_blocking(authorizer.create_acls, [b for _, b in valid])
    for (index, _), failure in zip(valid, outcomes):
        error, message = (Errors.NONE, None) if failure is None else api_error(failure)
        results[index] = Result(error_code=int(error), error_message=message)
    return Response.send(request, CreateAclsResponse(results=results))


def delete_acls_error(request: Request, error: Errors) -> Any:
    return DeleteAclsResponse(filter_results=[
        DeleteAclsResponse.DeleteAclsFilterResult(error_code=int(error), matching_acls=[])
        for _ in request.body().filters])


@handles(ApiKey.DELETE_ACLS, error_response=delete_acls_error)
async def handle_delete_acls(services: BrokerServices, request: Request) -> Response:
    authorizer = services.auth.authorizer
    FilterResult = DeleteAclsResponse.DeleteAclsFilterResult
    filters = request.body().filters
    if authorizer is None:
        return Response.send(request, DeleteAclsResponse(filter_results=[
            FilterResult(error_code=int(Errors.SECURITY_DISABLED), error_message=NO_AUTHORIZER, matching_acls=[])
            for _ in filters]))
    parsed: list[AclBindingFilter | None] = []
    for entry in filters:
        try:
            parsed.append(_filter(entry))
        except ValueError:
            parsed.append(None)
    deleted = await services.pool.run_blocking(authorizer.delete_acls, [f for f in parsed if f is not None])
    results = []
    for binding_filter in parsed:
        if binding_filter is None:
            results.append(FilterResult(error_code=int(Errors.INVALID_REQUEST), error_message="Invalid ACL filter",
                                        matching_acls=[]))
            continue
        matching = []
        for binding, failure in deleted.pop(0):
            error, message = (Errors.NONE, None) if failure is None else api_error(failure)
            p, e = binding.pattern, binding.entry
            matching.append(DeleteAclsResponse.DeleteAclsMatchingAcl(
                error_code=int(error), error_message=message, resource_type=int(p.resource_type),
                resource_name=p.name, pattern_type=int(p.pattern_type), principal=e.principal, host=e.host,
                operation=int(e.operation), permission_type=int(e.permission_type)))
        results.append(FilterResult(error_code=0, error_message=None, matching_acls=matching))
    return Response.send(request, DeleteAclsResponse(filter_results=results))
