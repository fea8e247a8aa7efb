# cave-pipeline infrastructure
# ============================
#
# What this creates (one pipeline per project; file in brackets):
#
#   * the project APIs the pipeline uses                                          [main.tf]
#   * a GKE Autopilot cluster, system logs only; an Artifact Registry
#     repository for the worker images                                         [cluster.tf]
#   * service accounts: workers (Workload Identity -> Bigtable), the controller
#     (the three functions), the functions' build, and a deployer for Cloud Build  [iam.tf]
#   * Pub/Sub topics job-events / ticks / kick / alerts, the `alerts-operator`
#     pull subscription, the log sink of Kubernetes Job events -> job-events, and
#     the one-minute Cloud Scheduler heartbeat -> ticks                          [pubsub.tf]
#   * Firestore (default) database, Native mode, with a TTL on dedupe.expires_at [firestore.tf]
#   * the Cloud Functions (gen2) on-job-event / on-tick / on-kick              [functions.tf]
#
# Bigtable and the data buckets are not managed here (as with the predecessor): they hold the
# graphs and outlive any deployment.
#
# Who owns what after the first apply
# -----------------------------------
# Terraform owns the infrastructure, including each function's settings (trigger, identity,
# scaling, environment). Code updates go through Cloud Build (`cloudbuild.yaml`: unit tests,
# worker image, `gcloud functions deploy`); terraform ignores the functions' source after
# creating them, so an apply from an older checkout never rolls the controller back.
# Terraform *can* push code instead - stage it, then
# `terraform apply -replace='google_cloudfunctions2_function.fn["on-tick"]'` (and the others) -
# but the documented path is: terraform for infra, Cloud Build for code.
#
# Use
# ---
# Roles for whoever applies: Kubernetes Engine Admin, Service Account Admin, Project IAM Admin,
# Pub/Sub Admin, Cloud Functions Admin, Cloud Datastore Owner, Logging Admin, Cloud Scheduler
# Admin, Storage Admin, Service Usage Admin (or Owner). Authenticate as that person:
#
#   gcloud auth application-default login        # or:
#   export GOOGLE_OAUTH_ACCESS_TOKEN=$(gcloud auth print-access-token)   # ~1 h
#
#   gcloud services enable serviceusage.googleapis.com cloudresourcemanager.googleapis.com \
#     --project=<project_id>           # terraform needs these two to enable the rest
#   cp terraform/terraform.tfvars.example terraform/terraform.tfvars     # set project_id, ...
#   scripts/stage_functions.sh                  # build/functions-src: the functions' first code
#                                               # (every plan reads it: stage before each apply)
#   cd terraform && terraform init && terraform apply                    # ~15 min (Autopilot)
#
# A first apply can fail on IAM propagation (a fresh service account not yet usable by a
# function build or trigger); running `terraform apply` again finishes it.
#
# Then:
#   1. run the `kubernetes_cluster_context` output (points kubectl at the cluster);
#   2. run the `worker_ksa_setup` output: it creates the Kubernetes service account
#      `pipeline-worker` (var.worker_ksa) in the namespace and annotates it with the worker
#      Google service account (Workload Identity). Terraform does not manage objects inside
#      the cluster, which keeps this config to one provider and one apply;
#   3. put `worker_service_account` into pipeline.yml (`workload_identity.gsa_email`) and the
#      Bigtable project/instance there too;
#   4. code updates: a Cloud Build trigger on the repo running cloudbuild.yaml as the
#      `deployer_service_account`, or by hand (see cloudbuild.yaml's header);
#   5. people who want alerts: `gcloud pubsub subscriptions pull alerts-operator --auto-ack`
#      (see pubsub.tf for e-mail/chat).
#
# An existing Firestore (default) database: set `create_firestore_database = false` (or
# `terraform import google_firestore_database.default projects/<p>/databases/(default)`).
#
# Teardown: `pipeline undeploy`, then `terraform destroy` - it removes the cluster (and every
# Job with it), the functions, topics, sink, scheduler and service accounts. The Firestore
# database is abandoned, not deleted (run history and costs stay; delete it in the console if
# wanted); APIs stay enabled; Bigtable and data buckets are untouched.

terraform {
  required_version = ">= 1.6"

  required_providers {
    google = {
      source  = "hashicorp/google"
      version = "~> 6.0"
    }
    archive = {
      source  = "hashicorp/archive"
      version = "~> 2.4"
    }
  }
}

provider "google" {
  project = var.project_id
  region  = var.region
}

data "google_project" "this" {
  project_id = var.project_id
}

locals {
  # Topic names are fixed by the code (shared/adapters/pubsub_bus.py TOPICS).
  topics = toset(["job-events", "ticks", "kick", "alerts"])

  cluster_name = var.common_name

  worker_ksa = var.worker_ksa

  # Google-managed identities referenced below.
  pubsub_service_agent   = "serviceAccount:service-${data.google_project.this.number}@gcp-sa-pubsub.iam.gserviceaccount.com"
  compute_default_member = "serviceAccount:${data.google_project.this.number}-compute@developer.gserviceaccount.com"
}

# --- APIs --------------------------------------------------------------------------------

resource "google_project_service" "apis" {
  for_each = toset([
    "container.googleapis.com",        # GKE
    "cloudfunctions.googleapis.com",   # Cloud Functions gen2 ...
    "run.googleapis.com",              # ... run on Cloud Run
    "eventarc.googleapis.com",         # ... triggered through Eventarc
    "pubsub.googleapis.com",           # topics
    "firestore.googleapis.com",        # run state
    "cloudscheduler.googleapis.com",   # the heartbeat
    "cloudbuild.googleapis.com",       # function builds, CI
    "logging.googleapis.com",          # the Job-event sink
    "artifactregistry.googleapis.com", # images (worker, function builds)
    "iam.googleapis.com",              # service accounts
    "storage.googleapis.com",          # the functions' source bucket
  ])

  service = each.value

  # Leave APIs on at destroy: other things in the project may use them, and disabling
  # container/firestore APIs can take a long time or fail while resources drain.
  disable_on_destroy         = false
  disable_dependent_services = false
}
