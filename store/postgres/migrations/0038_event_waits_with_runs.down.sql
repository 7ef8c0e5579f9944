DROP INDEX trigger_groups_ended;
