"""The serverless backend: stateless writers over a shared directory (EFS) and DynamoDB (store.py says how)."""
