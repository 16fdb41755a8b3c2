"""Push delivery (RocketMQ's push consumer): new messages go to each push group's target without anybody polling.

`handler.py` is the push Lambda function (invoked asynchronously after a produce), `worker.py` its stand-in
inside the local gateway, `trigger.py` what sets either going, `subscribers.py` which groups push from which
topic; the delivery itself is `functions.logic.push`.
"""
