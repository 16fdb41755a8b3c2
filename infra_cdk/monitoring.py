"""Operations: CloudWatch alarms to one SNS topic, and a dashboard of the same figures.

    <function>-errors       any function's errors (5 minutes), but bootstrap's (invoked by hand, once)
    <function>-throttles    any function's throttles, but push's, whose reserved concurrency of 1 queues its
                            asynchronous invocations by design: for it, events Lambda dropped unprocessed
    upload-lag              the oldest message not yet in the cold tier (TierUploadLagSeconds, emitted by every
                            maintenance run and every tier-status read) older than `upload_lag_alarm_s`
    maintenance-failing     queues a maintenance run had to leave for the next one, three periods running
    push-dead-lettered      messages push delivery gave up on (moved to a dead-letter topic)
    push-failing-calls      push target calls failing (`push_failed_calls_alarm` in 5 minutes)
    dead-letters            anything in the dead-letter queue (failed asynchronous invocations, schedules)
    job-runs-failed         EMR Serverless job runs that failed
    api-5xx                 the HTTP API's 5xx answers (a bug or an outage, never a client's mistake)

The TideMQ metrics are the functions' own (Powertools EMF, namespace TideMQ, dimension service=tidemq).
"""

from __future__ import annotations

from aws_cdk import Duration
from aws_cdk import aws_cloudwatch as cloudwatch
from aws_cdk import aws_cloudwatch_actions as actions
from aws_cdk import aws_sns as sns
from aws_cdk import aws_sns_subscriptions as subscriptions
from cdk_nag import NagPackSuppression, NagSuppressions
from constructs import Construct

from .api import Api
from .config import DeployConfig
from .functions import BOOTSTRAP, NAMESPACE, SERVICE, Functions
from .pipeline import Pipeline

PERIOD = Duration.minutes(5)
TIDEMQ_METRICS = (
    "MessagesProduced",
    "MessagesConsumed",
    "MessagesUploaded",
    "MaintenanceFailures",
    "TierUploadLagSeconds",
    "PushDelivered",
    "PushFailedCalls",
    "PushDeadLettered",
)
"""The functions' metrics the alarms and the dashboard use (tests/infra checks each is emitted by a function)."""


def tidemq_metric(name: str, statistic: str = "Sum") -> cloudwatch.Metric:
    assert name in TIDEMQ_METRICS, name
    return cloudwatch.Metric(
        namespace=NAMESPACE, metric_name=name, dimensions_map={"service": SERVICE}, statistic=statistic, period=PERIOD
    )


class Monitoring(Construct):
    """The alarm topic, the alarms and the dashboard."""

    def __init__(
        self, scope: Construct, id: str, *, config: DeployConfig, functions: Functions, api: Api, pipeline: Pipeline
    ) -> None:
        super().__init__(scope, id)
        self.prefix = config.prefix
        self.topic = sns.Topic(self, "Alarms", display_name="TideMQ alarms", enforce_ssl=True)
        NagSuppressions.add_resource_suppressions(
            self.topic,
            [
                NagPackSuppression(
                    id="AwsSolutions-SNS2",
                    reason="Alarm notifications carry alarm names and states, no message data; CloudWatch cannot "
                    "publish to a topic under the AWS-managed SNS key, and a customer key would cost $1/month.",
                )
            ],
        )
        if config.alarm_email:
            self.topic.add_subscription(subscriptions.EmailSubscription(config.alarm_email))
        self.alarms: dict[str, cloudwatch.Alarm] = {}

        for name, function in functions.functions.items():
            if name == BOOTSTRAP:  # invoked by hand, once: its caller sees its answer
                continue
            self._alarm(f"{name}-errors", function.metric_errors(period=PERIOD, statistic="Sum"), 1)
            if name == "push":
                dropped = function.metric("AsyncEventsDropped", period=PERIOD, statistic="Sum")
                self._alarm("push-dropped-events", dropped, 1)
            else:
                self._alarm(f"{name}-throttles", function.metric_throttles(period=PERIOD, statistic="Sum"), 1)
        self._alarm("upload-lag", tidemq_metric("TierUploadLagSeconds", "Maximum"), config.upload_lag_alarm_s)
        self._alarm("maintenance-failing", tidemq_metric("MaintenanceFailures"), 1, periods=3)
        self._alarm("push-dead-lettered", tidemq_metric("PushDeadLettered"), 1)
        self._alarm("push-failing-calls", tidemq_metric("PushFailedCalls"), config.push_failed_calls_alarm)
        depth = functions.dead_letters.metric_approximate_number_of_messages_visible(period=PERIOD, statistic="Maximum")
        self._alarm("dead-letters", depth, 1)
        failed_runs = cloudwatch.Metric(
            namespace="AWS/EMRServerless",
            metric_name="FailedJobs",
            dimensions_map={"ApplicationId": pipeline.application.attr_application_id},
            statistic="Sum",
            period=PERIOD,
        )
        self._alarm("job-runs-failed", failed_runs, 1)
        server_errors = cloudwatch.Metric(
            namespace="AWS/ApiGateway",
            metric_name="5xx",
            dimensions_map={"ApiId": api.http_api.api_id, "Stage": "$default"},
            statistic="Sum",
            period=PERIOD,
        )
        self._alarm("api-5xx", server_errors, 1)

        self.dashboard = cloudwatch.Dashboard(self, "Dashboard", dashboard_name=f"{config.prefix}-operations")
        graph = cloudwatch.GraphWidget
        self.dashboard.add_widgets(
            cloudwatch.AlarmStatusWidget(title="Alarms", alarms=list(self.alarms.values()), width=24),
        )
        self.dashboard.add_widgets(
            graph(title="Messages", left=[tidemq_metric(n) for n in ("MessagesProduced", "MessagesConsumed")]),
            graph(
                title="Cold tier",
                left=[tidemq_metric("MessagesUploaded"), tidemq_metric("MaintenanceFailures")],
                right=[tidemq_metric("TierUploadLagSeconds", "Maximum")],
            ),
            graph(
                title="Push",
                left=[tidemq_metric(n) for n in ("PushDelivered", "PushFailedCalls", "PushDeadLettered")],
            ),
        )
        self.dashboard.add_widgets(
            graph(
                title="Function errors",
                left=[f.metric_errors(period=PERIOD, label=n) for n, f in functions.functions.items()],
            ),
            graph(
                title="Function throttles",
                left=[f.metric_throttles(period=PERIOD, label=n) for n, f in functions.functions.items()],
            ),
            graph(title="API 5xx, dead letters, failed job runs", left=[server_errors, depth, failed_runs]),
        )

    def _alarm(self, name: str, metric: cloudwatch.IMetric, threshold: float, periods: int = 1) -> None:
        alarm = cloudwatch.Alarm(
            self,
            name,
            alarm_name=f"{self.prefix}-{name}",
            metric=metric,
            threshold=threshold,
            evaluation_periods=periods,
            datapoints_to_alarm=periods,
            comparison_operator=cloudwatch.ComparisonOperator.GREATER_THAN_OR_EQUAL_TO_THRESHOLD,
            treat_missing_data=cloudwatch.TreatMissingData.NOT_BREACHING,
        )
        alarm.add_alarm_action(actions.SnsAction(self.topic))
        self.alarms[name] = alarm
