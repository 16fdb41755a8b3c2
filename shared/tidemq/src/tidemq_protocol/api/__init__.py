"""The HTTP API's JSON bodies (pydantic), one module per area: shared by the handlers, the OpenAPI document and the
SDK. `common` holds what they all use: the JSON Schema spelling of every check the server makes, so that
docs/openapi.json states it."""
