-- ListTriggerGroups pages a trigger's groups by id (GET
-- /triggers/{name}/groups, heph triggers groups): with this index a page
-- reads its groups and stops, whatever the other triggers' groups and
-- the trigger's older ones kept until the retention sweep. It costs an
-- entry per group, which only flow-controlled triggers make.
CREATE INDEX trigger_groups_list ON trigger_groups (trigger_name, id);
