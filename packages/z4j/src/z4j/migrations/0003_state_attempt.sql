-- The attempt (the event's retry count) of the claim that set a task's state. Celery republishes
-- a retried task before it reports the retry, so a later attempt can finish before the earlier
-- attempt's "retried" is stamped; ordering claims by attempt first keeps the outcome.
-- Events without a retry count sort as the latest attempt (2^31 - 1), see z4j.domain.taskstate.
ALTER TABLE tasks ADD COLUMN state_attempt integer NOT NULL DEFAULT 2147483647;
