SET lock_timeout = '10s';
SET statement_timeout = '5min';

-- The W3C traceparent of the span that received the event, when tracing
-- was on: every worker that claims one of its keys (first call, retry,
-- sweeper's reset, reconciler's re-enqueue, replay) reads it with the
-- claim and joins the event's trace. NULL when tracing was off. A column
-- without a default is added without rewriting the table.
ALTER TABLE events ADD COLUMN trace_parent text;
