"""The AWS CDK app of TideMQ (docs/deploy.md): `app.py` builds one stack of six constructs, one per concern:

    network.py     VPC without NAT, gateway endpoints for S3 and DynamoDB, the Lambda interface endpoint
    storage.py     EFS and its access point, the buckets, the DynamoDB tables (from the pynamodb models), the auth key
    functions.py   the Lambda functions, their layers, roles and schedules
    api.py         the HTTP API: functions/routes.py's routes, the authorizer, throttling
    pipeline.py    EMR Serverless, the Spark package, the job schedules
    monitoring.py  alarms, their topic, the dashboard
    grpc_proxy.py  optional (`-c grpc_proxy=true`): the RocketMQ 5 gRPC proxy on ECS Fargate behind an ALB, its image
                   from proxy/Dockerfile

config.py reads the CDK context; assets.py builds the function code and layers (and the proxy's image context)
without Docker; permissions.py says what each principal may do. `cdk.json` runs `python -m infra_cdk.app`.
"""
