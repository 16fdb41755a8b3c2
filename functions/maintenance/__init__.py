"""Maintenance: the serverless backend's scheduled work (upload to the cold tier, clean-up, retention).

`handler.py` is the Lambda function an EventBridge schedule invokes; `schedule.py` its stand-in inside the
local gateway, a timer that invokes the same handler with the same events.
"""
