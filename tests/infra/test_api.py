"""The HTTP API serves exactly the route table of functions/routes.py, behind the authorizer, throttled and logged."""

from __future__ import annotations

from aws_cdk.assertions import Match, Template

from functions.api.auth import PUBLIC_PATHS
from functions.routes import routes
from infra_cdk.api import SIGNATURE_HEADERS
from tests.infra.cloud import render


def integration_functions(synthesized, functions_by_name) -> dict[str, str]:
    """Each integration's logical id -> the TideMQ function it invokes."""
    by_logical_id = {logical_id: name for name, (logical_id, _) in functions_by_name.items()}
    found = {}
    for logical_id, resource in synthesized.of_type("AWS::ApiGatewayV2::Integration").items():
        uri = resource["Properties"]["IntegrationUri"]
        found[logical_id] = by_logical_id[uri["Fn::GetAtt"][0]]
        assert resource["Properties"]["PayloadFormatVersion"] == "2.0"
    return found


def deployed_routes(synthesized) -> dict[str, dict]:
    return {
        resource["Properties"]["RouteKey"]: resource["Properties"]
        for resource in synthesized.of_type("AWS::ApiGatewayV2::Route").values()
    }


def test_every_route_of_the_route_table_reaches_its_function_and_no_other_route_exists(synthesized, functions_by_name):
    integrations = integration_functions(synthesized, functions_by_name)
    deployed = {
        key: integrations[render(properties["Target"]).removeprefix("integrations/").strip("<>")]
        for key, properties in deployed_routes(synthesized).items()
    }
    assert deployed == {route.route_key: route.function for route in routes()}


def test_the_authorizer_guards_every_route_but_the_public_ones_and_the_console_s(synthesized, functions_by_name):
    ((authorizer_id, authorizer),) = synthesized.of_type("AWS::ApiGatewayV2::Authorizer").items()
    properties = authorizer["Properties"]
    assert properties["AuthorizerType"] == "REQUEST"
    assert properties["AuthorizerPayloadFormatVersion"] == "2.0"
    assert properties["EnableSimpleResponses"] is True
    assert properties["AuthorizerResultTtlInSeconds"] > 0  # cached; a request lacking a signature header never calls it
    assert properties["IdentitySource"] == [f"$request.header.{header}" for header in SIGNATURE_HEADERS]
    authorizer_function = functions_by_name["authorizer"][0]
    assert f"<{authorizer_function}.Arn>" in render(properties["AuthorizerUri"])

    for key, route in deployed_routes(synthesized).items():
        path = key.split(" ", 1)[1]
        if path in PUBLIC_PATHS or path.startswith("/console"):  # the console checks its own session cookie
            assert route.get("AuthorizationType", "NONE") == "NONE", key
            assert "AuthorizerId" not in route, key
        else:
            assert route["AuthorizationType"] == "CUSTOM", key
            assert route["AuthorizerId"] == {"Ref": authorizer_id}, key
    assert {key.split(" ", 1)[1] for key in deployed_routes(synthesized)} >= PUBLIC_PATHS


def test_the_stage_throttles_and_logs_every_request(synthesized):
    template = Template.from_json(synthesized.template)
    template.has_resource_properties(
        "AWS::ApiGatewayV2::Stage",
        {
            "StageName": "$default",
            "AutoDeploy": True,
            "DefaultRouteSettings": {
                "ThrottlingRateLimit": Match.any_value(),
                "ThrottlingBurstLimit": Match.any_value(),
            },
            "AccessLogSettings": {"DestinationArn": Match.any_value(), "Format": Match.string_like_regexp("requestId")},
        },
    )


def test_the_api_functions_refuse_bodies_lambda_could_not_take(functions_by_name):
    for name in ("admin", "produce", "consume"):
        variables = functions_by_name[name][1]["Environment"]["Variables"]
        # API Gateway passes a binary body in base64 (4/3 its size) within Lambda's 6 MB payload
        assert int(variables["TIDEMQ_MAX_REQUEST_BYTES"]) * 4 / 3 < 6_000_000 - 64 * 1024, name
