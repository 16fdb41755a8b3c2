"""Project code shared by functions, the SDK and Spark jobs: the settings model and common models."""
