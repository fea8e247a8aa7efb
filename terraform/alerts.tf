# --- Alerts reach people: Cloud Monitoring policies by severity -----------------------------------
#
# The controller writes one structured log entry per alert it publishes (jsonPayload.message =
# "alert published", with kind, alert_severity, run, stage, layer, summary, fix:
# shared/control/alert_severity.py). One log-based alert policy per alert kind turns those
# entries into notifications on the channels of the kind's severity; the notification's text
# is the entry's summary and fix, and `pipeline alerts RUN` lists the run's alerts.
#
# Three more policies watch the controller itself: its functions' error logs, the dead-letter
# backlog, and the tick's silence (no `ticked` heartbeat line for tick_silence_minutes).
#
# Severities (docs/alerts.md#severities; tests/unit/deploy/test_alert_policies.py holds this
# table, the Python one and the docs together):
#   page    the build is stopped or the controller is failing: someone acts tonight
#   notify  the build goes on degraded or dearer: someone looks in the morning
#   inform  news for whoever watches

locals {
  # Mirror of shared/control/alert_severity.py SEVERITIES (a test compares them).
  alert_severities = {
    "layer_failed"             = "page"
    "setup_failed"             = "page"
    "run_unhealthy"            = "page"
    "message_dead_lettered"    = "page"
    "layer_incomplete"         = "page"
    "root_check_failed"        = "page"
    "failed_indexes"           = "notify"
    "oom_killed"               = "notify"
    "pod_hung"                 = "notify"
    "index_evicted_repeatedly" = "notify"
    "budget_reached"           = "notify"
    "layer_stalled"            = "notify"
    "canary_failed"            = "notify"
    "claim_lost"               = "notify"
    "cave_registration_failed" = "notify"
    "approval_needed"          = "inform"
    "run_finished"             = "inform"
  }

  # A deployment's own choice wins (alert_severity_overrides); the log entry's alert_severity
  # stays the code's, so the policies route on jsonPayload.kind.
  effective_alert_severities = merge(local.alert_severities, var.alert_severity_overrides)

  alert_severity_levels = ["page", "notify", "inform"]

  # Cloud Monitoring's own incident severity of each of ours.
  monitoring_severity = {
    page   = "CRITICAL"
    notify = "ERROR"
    inform = "WARNING"
  }

  alert_emails = toset(flatten([for level in local.alert_severity_levels : lookup(var.alert_emails, level, [])]))

  # Each severity's channels: the operator's existing ones (ids) and the e-mail channels below.
  alert_channels = {
    for level in local.alert_severity_levels : level => concat(
      lookup(var.alert_notification_channels, level, []),
      [for email in lookup(var.alert_emails, level, []) : google_monitoring_notification_channel.email[email].id],
    )
  }

  # The functions' logs: gen2 functions run (and log) as Cloud Run services of the same name.
  # The filters are plain strings (a test renders them and evaluates them against the log
  # lines the controller writes); the service names are local.functions' keys (a test).
  function_logs_filter = "resource.type=\"cloud_run_revision\" AND resource.labels.service_name=(\"on-job-event\" OR \"on-tick\" OR \"on-kick\" OR \"on-dead-letter\")"

  # The entry of one published alert; the kind is ANDed on per policy.
  alert_log_filter = "${local.function_logs_filter} AND jsonPayload.message=\"alert published\""

  # What an error of the controller is: an ERROR (or worse) entry of its functions. An alert's
  # own entry is logged below ERROR (shared.control.alert_severity.LOG_LEVELS).
  function_errors_filter = "${local.function_logs_filter} AND severity>=ERROR"

  # The tick's heartbeat line (shared/control/triggers.py on_tick), logged whatever the runs.
  ticked_filter = "${local.function_logs_filter} AND jsonPayload.message=\"ticked\""

  alert_rate_limit = "${var.alert_rate_limit_minutes * 60}s"
}

resource "google_monitoring_notification_channel" "email" {
  for_each = local.alert_emails

  display_name = "cave-pipeline alerts: ${each.value}"
  type         = "email"
  labels = {
    email_address = each.value
  }

  depends_on = [google_project_service.apis]
}

resource "google_monitoring_alert_policy" "alert" {
  for_each = local.effective_alert_severities

  display_name = "cave-pipeline ${each.value}: ${each.key}"
  combiner     = "OR"
  severity     = local.monitoring_severity[each.value]

  conditions {
    display_name = "a ${each.key} alert was published"
    condition_matched_log {
      filter = "${local.alert_log_filter} AND jsonPayload.kind=\"${each.key}\""
      # Shown in the notification as $${log.extracted_label.NAME}.
      label_extractors = {
        run     = "EXTRACT(jsonPayload.run)"
        stage   = "EXTRACT(jsonPayload.stage)"
        layer   = "EXTRACT(jsonPayload.layer)"
        summary = "EXTRACT(jsonPayload.summary)"
        fix     = "EXTRACT(jsonPayload.fix)"
      }
    }
  }

  alert_strategy {
    # A burst (a bad image failing every layer) is one notification per period, not hundreds.
    notification_rate_limit {
      period = local.alert_rate_limit
    }
    auto_close = "1800s"
  }

  notification_channels = local.alert_channels[each.value]

  documentation {
    subject   = "cave-pipeline ${each.value}: $${log.extracted_label.summary}"
    mime_type = "text/markdown"
    content = join("\n\n", [
      "**What happened**: $${log.extracted_label.summary} (alert `${each.key}`, severity ${each.value}).",
      "**What to do**: `$${log.extracted_label.fix}`",
      "The run's alerts, each with its fix: `pipeline alerts $${log.extracted_label.run}`; its state: `pipeline status $${log.extracted_label.run}`.",
      "Kinds and severities: docs/alerts.md.",
    ])
  }

  user_labels = {
    source   = "cave-pipeline"
    severity = each.value
  }
}

resource "google_monitoring_alert_policy" "function_errors" {
  display_name = "cave-pipeline ${var.controller_alert_severity}: controller function errors"
  combiner     = "OR"
  severity     = local.monitoring_severity[var.controller_alert_severity]

  conditions {
    display_name = "a controller function logged an error"
    condition_matched_log {
      filter = local.function_errors_filter
      label_extractors = {
        function = "EXTRACT(resource.labels.service_name)"
        run      = "EXTRACT(jsonPayload.run)"
        message  = "EXTRACT(jsonPayload.message)"
      }
    }
  }

  alert_strategy {
    notification_rate_limit {
      period = local.alert_rate_limit
    }
    auto_close = "1800s"
  }

  notification_channels = local.alert_channels[var.controller_alert_severity]

  documentation {
    subject   = "cave-pipeline: $${log.extracted_label.function} logged an error"
    mime_type = "text/markdown"
    content = join("\n\n", [
      "**What happened**: the controller function $${log.extracted_label.function} logged an error: $${log.extracted_label.message} (run $${log.extracted_label.run}).",
      "**What to do**: `pipeline doctor`, then `pipeline status $${log.extracted_label.run}`; the function's logs: `gcloud logging read 'resource.type=\"cloud_run_revision\" AND resource.labels.service_name=\"$${log.extracted_label.function}\" AND severity>=ERROR' --limit=20`.",
      "Transient errors are retried by Pub/Sub (docs/deploying.md#dead-letters); a run failing 5 ticks in a row also raises run_unhealthy.",
    ])
  }

  user_labels = {
    source   = "cave-pipeline"
    severity = var.controller_alert_severity
  }
}

resource "google_monitoring_alert_policy" "dead_letter_backlog" {
  display_name = "cave-pipeline ${var.controller_alert_severity}: dead letters waiting"
  combiner     = "OR"
  severity     = local.monitoring_severity[var.controller_alert_severity]

  conditions {
    display_name = "undelivered messages on the dead-letters subscriptions"
    condition_threshold {
      # dead-letters-trigger (on-dead-letter's own: its backlog means the alerts about dead
      # letters are not going out) and dead-letters-operator (the kept copies nobody read).
      filter          = "resource.type=\"pubsub_subscription\" AND metric.type=\"pubsub.googleapis.com/subscription/num_undelivered_messages\" AND resource.labels.subscription_id=starts_with(\"dead-letters\")"
      comparison      = "COMPARISON_GT"
      threshold_value = var.dead_letter_backlog_threshold
      duration        = "300s"
      aggregations {
        alignment_period   = "300s"
        per_series_aligner = "ALIGN_MAX"
      }
      trigger {
        count = 1
      }
    }
  }

  alert_strategy {
    notification_rate_limit {
      period = local.alert_rate_limit
    }
    auto_close = "86400s"
  }

  notification_channels = local.alert_channels[var.controller_alert_severity]

  documentation {
    subject   = "cave-pipeline: dead letters are waiting"
    mime_type = "text/markdown"
    content = join("\n\n", [
      "**What happened**: messages to the controller's functions failed every delivery and wait on a dead-letters subscription.",
      "**What to do**: `gcloud pubsub subscriptions pull dead-letters-operator --limit=10 --format=json`, read the message_dead_lettered alerts (`pipeline alerts RUN --kind message_dead_lettered`), fix the cause, then replay or acknowledge (docs/deploying.md#dead-letters).",
    ])
  }

  user_labels = {
    source   = "cave-pipeline"
    severity = var.controller_alert_severity
  }
}

# The tick's heartbeat as a metric: one count per `ticked` line.
resource "google_logging_metric" "ticks" {
  name        = "cave-pipeline/ticks"
  description = "cave-pipeline: ticks that ran (the `ticked` line of on-tick)"
  filter      = local.ticked_filter

  metric_descriptor {
    metric_kind = "DELTA"
    value_type  = "INT64"
    unit        = "1"
  }
}

resource "google_monitoring_alert_policy" "tick_silence" {
  display_name = "cave-pipeline ${var.controller_alert_severity}: the tick is silent"
  combiner     = "OR"
  severity     = local.monitoring_severity[var.controller_alert_severity]

  conditions {
    display_name = "no tick for ${var.tick_silence_minutes} minutes"
    # The heartbeat, not the reconciles: a tick logs `ticked` whatever the runs, so an idle
    # project stays quiet and a broken scheduler, function or deploy does not.
    condition_absent {
      filter   = "resource.type=\"cloud_run_revision\" AND metric.type=\"logging.googleapis.com/user/${google_logging_metric.ticks.name}\""
      duration = "${var.tick_silence_minutes * 60}s"
      aggregations {
        alignment_period     = "300s"
        per_series_aligner   = "ALIGN_SUM"
        cross_series_reducer = "REDUCE_SUM"
      }
      trigger {
        count = 1
      }
    }
  }

  alert_strategy {
    auto_close = "1800s"
  }

  notification_channels = local.alert_channels[var.controller_alert_severity]

  documentation {
    subject   = "cave-pipeline: the tick has not run for ${var.tick_silence_minutes} minutes"
    mime_type = "text/markdown"
    content = join("\n\n", [
      "**What happened**: on-tick logged no `ticked` line for ${var.tick_silence_minutes} minutes: running builds are not reconciled (no ramp, no stall detection, no alerts).",
      "**What to do**: `pipeline doctor`; `gcloud scheduler jobs describe ${google_cloud_scheduler_job.tick.name} --location=${var.region}`; the function's errors: `gcloud logging read 'resource.labels.service_name=\"on-tick\" AND severity>=ERROR' --limit=20`.",
    ])
  }

  user_labels = {
    source   = "cave-pipeline"
    severity = var.controller_alert_severity
  }
}
