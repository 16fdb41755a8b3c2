"""What the API does, knowing nothing of API Gateway: each function takes the store and plain
values or `shared.models` requests, and returns `shared.models` responses."""
