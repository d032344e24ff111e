"""AlterUserScramCredentials and DescribeUserScramCredentials (v0), as Kafka's ZkAdminManager.

Credentials are stored as ``SCRAM-SHA-256``/``SCRAM-SHA-512`` keys of ``/config/users/<user>``
(``salt=..,stored_key=..,server_key=..,iterations=..``), with a config change notification so that
every broker's credential cache picks them up. In ZooKeeper mode only the controller alters them
(NOT_CONTROLLER elsewhere); the cluster-level checks are in ``REQUEST_PERMISSIONS``.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from broker.handlers import handles
from broker.network.request_channel import Request, Response
from broker.security.scram import MAX_ITERATIONS, SCRAM_BY_TYPE, SCRAM_MECHANISMS, ScramCredential
from broker.services import BrokerServices
from protocol.api_keys import ApiKey
from protocol.errors import Errors, error_message
from protocol.messages import AlterUserScramCredentialsResponse, DescribeUserScramCredentialsResponse

EMPTY_USERNAME = "Username must not be empty"
UNKNOWN_MECHANISM = "Unknown SCRAM mechanism"
AlterResult = AlterUserScramCredentialsResponse.AlterUserScramCredentialsResult
DescribeResult = DescribeUserScramCredentialsResponse.DescribeUserScramCredentialsResult


def _illegal(body: Any) -> dict[str, tuple[Errors, str]]:
    """Users whose request is malformed: empty name, unknown mechanism, iterations out of range."""
    illegal: dict[str, tuple[Errors, str]] = {}
    for deletion in body.deletions:
        if not deletion.name:
            illegal[deletion.name] = (Errors.UNACCEPTABLE_CREDENTIAL, EMPTY_USERNAME)
        elif deletion.mechanism not in SCRAM_BY_TYPE:
            illegal[deletion.name] = (Errors.UNSUPPORTED_SASL_MECHANISM, UNKNOWN_MECHANISM)
    for upsertion in body.upsertions:
        mechanism = SCRAM_BY_TYPE.get(upsertion.mechanism)
        if not upsertion.name:
            illegal[upsertion.name] = (Errors.UNACCEPTABLE_CREDENTIAL, EMPTY_USERNAME)
        elif mechanism is None:
            illegal[upsertion.name] = (Errors.UNSUPPORTED_SASL_MECHANISM, UNKNOWN_MECHANISM)
        elif upsertion.iterations > MAX_ITERATIONS:
            illegal[upsertion.name] = (Errors.UNACCEPTABLE_CREDENTIAL, "Too many iterations")
        elif upsertion.iterations < mechanism.min_iterations:
            illegal[upsertion.name] = (Errors.UNACCEPTABLE_CREDENTIAL, "Too few iterations")
    return illegal


def alter_credentials(services: BrokerServices, body: Any) -> list[Any]:
    """Blocking (ZooKeeper). One result per user, in Kafka's order: malformed, duplicated, deleting
    what does not exist, then the users whose change was stored."""
    results = [AlterResult(user=user, error_code=int(error), error_message=message)
               for user, (error, message) in _illegal(body).items()]
    invalid = {r.user for r in results}
    pairs = [(c.name, c.mechanism) for c in (*body.upsertions, *body.deletions) if c.name not in invalid]
    duplicated = {user for (user, _), count in Counter(pairs).items() if count > 1}
    results += [AlterResult(user=user, error_code=int(Errors.DUPLICATE_RESOURCE),
                            error_message="A user credential cannot be altered twice in the same request")
                for user in sorted(duplicated)]
    users = list(dict.fromkeys(user for user, _ in pairs if user not in duplicated))
    configs = {user: services.zk.get_entity_config("users", user) for user in users}
    missing = {d.name for d in body.deletions
               if d.name in configs and SCRAM_BY_TYPE[d.mechanism].mechanism_name not in configs[d.name]}
    results += [AlterResult(user=user, error_code=int(Errors.RESOURCE_NOT_FOUND),
                            error_message="Attempt to delete a user credential that does not exist")
                for user in users if user in missing]
    for deletion in body.deletions:
        if deletion.name in configs and deletion.name not in missing:
            configs[deletion.name].pop(SCRAM_BY_TYPE[deletion.mechanism].mechanism_name, None)
    for upsertion in body.upsertions:
        if upsertion.name in configs and upsertion.name not in missing:
            mechanism = SCRAM_BY_TYPE[upsertion.mechanism]
            credential = ScramCredential.from_salted_password(mechanism, bytes(upsertion.salt),
                                                              bytes(upsertion.salted_password), upsertion.iterations)
            configs[upsertion.name][mechanism.mechanism_name] = credential.to_config_value()
    for user in users:
        if user in missing:
            continue
        try:
            services.admin_zk.change_configs("users", user, configs[user])
        except Exception as exc:  # ZooKeeper trouble fails only this user (Kafka's usersFailedToPersist)
            results.append(AlterResult(user=user, error_code=int(Errors.UNKNOWN_SERVER_ERROR), error_message=str(exc)))
            continue
        results.append(AlterResult(user=user, error_code=0))
    return results


def alter_error_response(request: Request, error: Errors) -> Any:
    body = request.body()
    users = dict.fromkeys(c.name for c in (*body.upsertions, *body.deletions))
    return AlterUserScramCredentialsResponse(results=[AlterResult(user=user, error_code=int(error),
                                                                  error_message=error_message(error))
                                                      for user in users])


@handles(ApiKey.ALTER_USER_SCRAM_CREDENTIALS, error_response=alter_error_response)
async def handle_alter_user_scram_credentials(services: BrokerServices, request: Request) -> Response:
    if not services.controller.is_active:
        return Response.send(request, alter_error_response(request, Errors.NOT_CONTROLLER))
    results = await services.pool.run_blocking(alter_credentials, services, request.body())
    return Response.send(request, AlterUserScramCredentialsResponse(results=results))


def _credential_infos(config: dict[str, str]) -> list[Any]:
    return [DescribeUserScramCredentialsResponse.CredentialInfo(
                mechanism=mechanism.type_code,
                iterations=ScramCredential.from_config_value(config[name]).iterations)
            for name, mechanism in SCRAM_MECHANISMS.items() if name in config]


def describe_credentials(services: BrokerServices, users: list[str] | None) -> list[Any]:
    """Blocking (ZooKeeper): every user with SCRAM credentials (sorted), or the users asked for."""
    if not users:
        configs = services.zk.get_all_entity_configs("users")
        return [DescribeResult(user=user, error_code=0, credential_infos=infos)
                for user, config in sorted(configs.items()) if (infos := _credential_infos(config))]
    counts = Counter(users)
    results = []
    for user in dict.fromkeys(users):
        if not user:
            results.append(DescribeResult(user=user, error_code=int(Errors.RESOURCE_NOT_FOUND),
                                          error_message=EMPTY_USERNAME, credential_infos=[]))
        elif counts[user] > 1:
            results.append(DescribeResult(
                user=user, error_code=int(Errors.DUPLICATE_RESOURCE), credential_infos=[],
                error_message=f"Cannot describe SCRAM credentials for the same user twice in a single request: {user}"))
        elif infos := _credential_infos(services.zk.get_entity_config("users", user)):
            results.append(DescribeResult(user=user, error_code=0, credential_infos=infos))
        else:
            results.append(DescribeResult(
                user=user, error_code=int(Errors.RESOURCE_NOT_FOUND), credential_infos=[],
                error_message=f"Attempt to describe a user credential that does not exist: {user}"))
    return results


def describe_error_response(request: Request, error: Errors) -> Any:
    """Kafka's getErrorResponse: the error at the top and once per user asked for, without the user's
    name. Of a request for every user (a null list) Kafka 3.9 builds none and never answers; this
    answers it with the error alone (docs/fencing.md)."""
    users = request.body().users or []
    return DescribeUserScramCredentialsResponse(error_code=int(error), error_message=None, results=[
        DescribeResult(user="", error_code=int(error), error_message=None, credential_infos=[]) for _ in users])


@handles(ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS, error_response=describe_error_response)
async def handle_describe_user_scram_credentials(services: BrokerServices, request: Request) -> Response:
    users = request.body().users
    results = await services.pool.run_blocking(describe_credentials, services,
                                               None if users is None else [u.name for u in users])
    return Response.send(request, DescribeUserScramCredentialsResponse(error_code=0, results=results))
