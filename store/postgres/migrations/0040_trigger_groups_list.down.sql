DROP INDEX trigger_groups_list;
