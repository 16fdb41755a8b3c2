"""The serverless backend (being built): stateless writers over a shared directory and DynamoDB."""
