"""Pure helpers of the admin API handlers (topic/config validation, DescribeConfigs entries)."""
