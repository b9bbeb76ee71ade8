//! Five-field cron schedules for `--snapshot_cron`.
