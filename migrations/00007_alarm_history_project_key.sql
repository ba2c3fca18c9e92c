-- +goose Up

-- Alarm ids are unique per project, not per tenant: an id used in another
-- project neither hides this project's entry nor tells anything about it.
ALTER TABLE alarm_history DROP CONSTRAINT alarm_history_tenant_id_id_key;
ALTER TABLE alarm_history ADD CONSTRAINT alarm_history_project_id_key UNIQUE (tenant_id, project_id, id);

-- +goose Down
ALTER TABLE alarm_history DROP CONSTRAINT alarm_history_project_id_key;
ALTER TABLE alarm_history ADD CONSTRAINT alarm_history_tenant_id_id_key UNIQUE (tenant_id, id);
