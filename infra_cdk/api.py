"""The HTTP API (API Gateway v2): one route per entry of the route table the local gateway serves
(functions/routes.py), each integrated with the function that serves it, and no other route.

Every route but the public ones (`functions.api.auth.PUBLIC_PATHS`: /health and /openapi.json) has the Lambda
authorizer, which refuses a request unless it carries a TideMQ signature (shared/signing.py) of a known user with
a date within the allowed skew. API Gateway gives an authorizer no request body, and caches its answers by the
signature headers alone, so the authorizer only lets a request through: the function still verifies the whole
signature (body, path, query) and refuses replays, and the authorizer's context never vouches for a user
(docs/deploy.md: the authorizer). A request without the three signature headers is refused by API Gateway itself,
without invoking anything.

The default stage throttles (`api_rate_limit`, `api_burst_limit`) and logs each request; the request body limit is
the functions' TIDEMQ_MAX_REQUEST_BYTES (`max_request_bytes`, within Lambda's 6 MB payload).
"""

from __future__ import annotations

import jsii
from aws_cdk import Duration, RemovalPolicy
from aws_cdk import aws_apigateway as apigw_v1
from aws_cdk import aws_apigatewayv2 as apigw
from aws_cdk import aws_apigatewayv2_authorizers as authorizers
from aws_cdk import aws_apigatewayv2_integrations as integrations
from aws_cdk import aws_logs as logs
from cdk_nag import NagPackSuppression, NagSuppressions
from constructs import Construct

from functions.api.auth import PUBLIC_PATHS
from functions.api.routing import Route
from functions.routes import routes
from tidemq_protocol import signing

from .config import DeployConfig
from .functions import AUTHORIZER, CONSOLE, Functions

SIGNATURE_HEADERS = (signing.AUTHORIZATION_HEADER, signing.DATE_HEADER, signing.NONCE_HEADER)
ACCESS_LOG_FORMAT = apigw_v1.AccessLogFormat.custom(
    '{"requestId":"$context.requestId","ip":"$context.identity.sourceIp","time":"$context.requestTime",'
    '"routeKey":"$context.routeKey","status":"$context.status","length":"$context.responseLength",'
    '"latency":"$context.responseLatency","integrationError":"$context.integrationErrorMessage",'
    '"authorizerError":"$context.authorizer.error"}'
)


@jsii.implements(apigw.IAccessLogSettings)
class AccessLogs:
    """Where and how the stage logs each request (an interface of the CDK with no class of its own in Python)."""

    def __init__(self, destination: apigw.IAccessLogDestination, format: apigw_v1.AccessLogFormat) -> None:
        self._destination, self._format = destination, format

    @property
    def destination(self) -> apigw.IAccessLogDestination:
        return self._destination

    @property
    def format(self) -> apigw_v1.AccessLogFormat:
        return self._format


def is_public(route: Route) -> bool:
    """Whether API Gateway lets a route through without the signature authorizer: health and the document, and the
    web console, whose pages check their own session (functions/console/session.py) and refuse what its user's
    policies do not allow."""
    return route.path in PUBLIC_PATHS or route.function == CONSOLE


class Api(Construct):
    """The HTTP API, its stage, authorizer and routes."""

    def __init__(self, scope: Construct, id: str, *, config: DeployConfig, functions: Functions) -> None:
        super().__init__(scope, id)
        self.http_api = apigw.HttpApi(
            self, "Http", api_name=f"{config.prefix}-api", description="TideMQ", create_default_stage=False
        )
        access_logs = logs.LogGroup(
            self, "AccessLogs", retention=config.log_retention, removal_policy=RemovalPolicy.DESTROY
        )
        self.stage = apigw.HttpStage(
            self,
            "Default",
            http_api=self.http_api,
            stage_name="$default",
            auto_deploy=True,
            throttle=apigw.ThrottleSettings(rate_limit=config.api_rate_limit, burst_limit=config.api_burst_limit),
            access_log_settings=AccessLogs(apigw.LogGroupLogDestination(access_logs), ACCESS_LOG_FORMAT),
        )

        self.authorizer: authorizers.HttpLambdaAuthorizer | None = None
        if config.authorizer == "lambda":
            self.authorizer = authorizers.HttpLambdaAuthorizer(
                "Signatures",
                functions.functions[AUTHORIZER],
                authorizer_name=f"{config.prefix}-signatures",
                response_types=[authorizers.HttpLambdaResponseType.SIMPLE],
                identity_source=[f"$request.header.{header}" for header in SIGNATURE_HEADERS],
                results_cache_ttl=Duration.seconds(config.authorizer_cache_s),
            )

        integration = {
            name: integrations.HttpLambdaIntegration(f"{name}-integration", function)
            for name, function in functions.api_functions.items()
        }
        self.routes: dict[str, apigw.HttpRoute] = {}
        for route in routes():
            public = is_public(route) or self.authorizer is None
            self.routes[route.route_key] = http_route = apigw.HttpRoute(
                self,
                f"{route.method} {route.path}",
                http_api=self.http_api,
                route_key=apigw.HttpRouteKey.with_(route.path, apigw.HttpMethod[route.method]),
                integration=integration[route.function],
                authorizer=apigw.HttpNoneAuthorizer() if public else self.authorizer,
            )
            if public:
                reason = (
                    "Public by design (functions.api.auth.PUBLIC_PATHS): health checks and the API document."
                    if route.path in PUBLIC_PATHS
                    else "The web console: its pages check a signed session cookie and the user's own policies."
                    if route.function == CONSOLE
                    else "authorizer=off: the functions themselves verify every request's signature."
                )
                NagSuppressions.add_resource_suppressions(
                    http_route, [NagPackSuppression(id="AwsSolutions-APIG4", reason=reason)], apply_to_children=True
                )

    @property
    def url(self) -> str:
        return self.http_api.api_endpoint
