# cave-pipeline infrastructure
# ============================
#
# What this creates (one pipeline per project; file in brackets):
#
#   * the project APIs the pipeline uses                                          [main.tf]
#   * the cluster's network: an existing one named by `network`/`subnetwork`, or a
#     new network and subnetwork; a Cloud Router + Cloud NAT for private nodes  [network.tf]
#   * a GKE Autopilot cluster, system logs only, its control plane reached through
#     its DNS endpoint; an Artifact Registry repository for the worker images  [cluster.tf]
#   * service accounts: workers and setup passes (Workload Identity -> Bigtable,
#     `data_buckets`), the controller (the functions), the push subscriptions'
#     invoker, the functions' build, the cluster's nodes, and a deployer for
#     Cloud Build                                                                  [iam.tf]
#   * Pub/Sub topics job-events / ticks / kick / alerts / dead-letters, the
#     `alerts-operator` pull subscription, the log sink of Kubernetes Job events ->
#     job-events, and the one-minute Cloud Scheduler heartbeat -> ticks          [pubsub.tf]
#   * Firestore (default) database, Native mode, with a TTL on dedupe.expires_at [firestore.tf]
#   * the Cloud Functions (gen2) on-job-event / on-tick / on-kick / on-dead-letter,
#     each fed by a push subscription with retries and a dead-letter topic     [functions.tf]
#   * inside the cluster: the pipeline's namespace, the pods' Kubernetes service
#     accounts, the controller's and the operators' Roles - rendered from
#     k8s/pipeline-kubernetes.yaml into the output `pipeline_kubernetes_manifest`,
#     applied with kubectl (step 2 below)                                      [outputs.tf]
#
# Bigtable and the data buckets are not managed here (as with the predecessor): they hold the
# graphs and outlive any deployment; the pods' grants on them are. The project's Binary
# Authorization policy is left alone unless manage_binary_authorization_policy is set.
# docs/deploying.md says what a lab gets, finding by finding.
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
# Roles for whoever applies (or Owner):
#   Kubernetes Engine Admin         roles/container.admin            the cluster
#   Compute Network Admin           roles/compute.networkAdmin       network, subnetwork, router, NAT
#   Service Account Admin           roles/iam.serviceAccountAdmin    the service accounts, their IAM
#   Service Account User            roles/iam.serviceAccountUser     create the cluster (node account)
#                                                                    and the functions (run/build as)
#   Project IAM Admin               roles/resourcemanager.projectIamAdmin  project-level grants
#   Artifact Registry Admin         roles/artifactregistry.admin     the repositories and their IAM
#   Pub/Sub Admin                   roles/pubsub.admin               topics, subscriptions, their IAM
#   Cloud Functions Admin           roles/cloudfunctions.admin       the functions
#   Cloud Run Admin                 roles/run.admin                  run.invoker on the functions' services
#   Cloud Datastore Owner           roles/datastore.owner            Firestore database, TTL field
#   Logging Admin                   roles/logging.admin              the Job-event sink
#   Cloud Scheduler Admin           roles/cloudscheduler.admin       the heartbeat
#   Storage Admin                   roles/storage.admin              the functions' source bucket
#   Service Usage Admin             roles/serviceusage.serviceUsageAdmin  APIs, the Pub/Sub service agent
#   Binary Authorization Policy Administrator  roles/binaryauthorization.policyAdministrator
#                                   only with manage_binary_authorization_policy = true
#   Bigtable Administrator          roles/bigtable.admin             the pods' grants on the instance
#                                   (on the Bigtable instance or its project, which may be another)
#   Storage Admin on each of data_buckets (or its project)           the pods' grants on them
# Authenticate as that person:
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
#   1. run the `kubernetes_cluster_context` output (points kubectl at the cluster through its
#      DNS endpoint: your Google account needs container.clusters.connect, e.g. as one of
#      operator_members; no allow-list);
#   2. create the namespace, the pods' Kubernetes service accounts (annotated with their
#      Google accounts for Workload Identity) and the controller's and operators' Roles (see
#      k8s/pipeline-kubernetes.yaml). Terraform does not manage objects inside the cluster,
#      which keeps this config to one provider and one apply:
#        terraform output -raw pipeline_kubernetes_manifest | kubectl apply -f -
#      (again whenever operator_members changes);
#   3. in pipeline.yml: `namespace` (var.namespace), `workload_identity.ksa` / `setup_ksa`
#      (var.worker_ksa / var.setup_ksa), the Bigtable project/instance;
#   4. `pipeline setup -c pipeline.yml` (the pods' Secret);
#   5. code updates: a Cloud Build trigger on the repo running cloudbuild.yaml as the
#      `deployer_service_account`, or by hand (see cloudbuild.yaml's header);
#   6. people who want alerts: `gcloud pubsub subscriptions pull alerts-operator --auto-ack`
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
    # 6.11 added control_plane_endpoints_config (the cluster's DNS endpoint, cluster.tf).
    google = {
      source  = "hashicorp/google"
      version = "~> 6.11"
    }
    google-beta = {
      source  = "hashicorp/google-beta"
      version = "~> 6.11"
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

  default_labels = var.labels
}

# Only for google_project_service_identity (beta-only) below.
provider "google-beta" {
  project = var.project_id
  region  = var.region

  default_labels = var.labels
}

data "google_project" "this" {
  project_id = var.project_id
}

locals {
  # Topic names are fixed by the code (adapters/google/pubsub_bus.py TOPICS, and
  # shared/control/dead_letters.py DEAD_LETTER_TOPIC).
  topics = toset(["job-events", "ticks", "kick", "alerts", "dead-letters"])

  cluster_name = var.common_name

  # The Pub/Sub service agent (service-<number>@gcp-sa-pubsub...), created below.
  pubsub_service_agent = google_project_service_identity.pubsub.member
}

# --- APIs --------------------------------------------------------------------------------

resource "google_project_service" "apis" {
  for_each = toset([
    "container.googleapis.com",           # GKE
    "cloudfunctions.googleapis.com",      # Cloud Functions gen2 ...
    "run.googleapis.com",                 # ... run on Cloud Run
    "pubsub.googleapis.com",              # topics, the functions' push subscriptions
    "firestore.googleapis.com",           # run state
    "cloudscheduler.googleapis.com",      # the heartbeat
    "cloudbuild.googleapis.com",          # function builds, CI
    "logging.googleapis.com",             # the Job-event sink
    "artifactregistry.googleapis.com",    # images (worker, function builds)
    "iam.googleapis.com",                 # service accounts
    "storage.googleapis.com",             # the functions' source bucket
    "binaryauthorization.googleapis.com", # the cluster evaluates the project's image policy
    "compute.googleapis.com",             # network, subnetwork, Cloud Router and NAT
    "monitoring.googleapis.com",          # Bigtable's load (the ramp's gate) and the bill
  ])

  service = each.value

  # Leave APIs on at destroy: other things in the project may use them, and disabling
  # container/firestore APIs can take a long time or fail while resources drain.
  disable_on_destroy         = false
  disable_dependent_services = false
}

# --- The Pub/Sub service agent ------------------------------------------------------------
#
# Pub/Sub creates its service agent lazily, so on a fresh project it may not exist yet when
# the grants below name it (token creator on the invoker, publisher on dead-letters,
# subscriber on the trigger subscriptions), and the apply fails. This creates it first; every
# grant to it references this resource, so terraform orders them after it.
resource "google_project_service_identity" "pubsub" {
  provider = google-beta

  project = var.project_id
  service = "pubsub.googleapis.com"

  depends_on = [google_project_service.apis]
}
