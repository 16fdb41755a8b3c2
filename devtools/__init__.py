"""Development tooling, never shipped to Lambda: the embedded moto server, LocalStack, and the local AWS a setting
asks for."""
