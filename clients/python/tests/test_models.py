"""The models say what the OpenAPI document says: same fields, same required ones."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml
from pydantic import BaseModel

from cairn import models

OPENAPI = Path(__file__).resolve().parents[3] / "infra" / "openapi.yaml"


def schema(name: str) -> dict[str, Any]:
    doc = yaml.safe_load(OPENAPI.read_text())
    return flatten(doc, doc["components"]["schemas"][name])


def flatten(doc: dict[str, Any], s: dict[str, Any]) -> dict[str, Any]:
    """Properties and required fields, with allOf merged and $refs followed."""
    if "$ref" in s:
        return flatten(doc, doc["components"]["schemas"][s["$ref"].rsplit("/", 1)[1]])
    properties = dict(s.get("properties", {}))
    required = set(s.get("required", []))
    for part in s.get("allOf", []):
        sub = flatten(doc, part)
        properties.update(sub["properties"])
        required |= sub["required"]
    return {"properties": properties, "required": required}


def response_schema(path: str, method: str, status: str) -> dict[str, Any]:
    doc = yaml.safe_load(OPENAPI.read_text())
    content = doc["paths"][path][method]["responses"][status]["content"]["application/json"]["schema"]
    return flatten(doc, content)


CASES: list[tuple[type[BaseModel], dict[str, Any]]] = [
    (models.Workflow, schema("Workflow")),
    (models.WorkflowSummary, schema("WorkflowSummary")),
    (models.Execution, schema("ExecutionAfterRollback")),  # discarded_checkpoints: after a rollback only
    (models.ExecutionSummary, schema("ExecutionSummary")),
    (models.Checkpoint, schema("Checkpoint")),
    (models.FailureSummary, schema("FailureItem")),
    (models.Failure, schema("FailureDetail")),
    (models.FailureStats, schema("FailureStats")),
    (models.FailureSettled, schema("FailureResolved")),  # resolved_at: not when ignored
    (models.FailureGroup, schema("FailureGroup")),
    (models.FailureGroupSettled, schema("FailureGroupSettled")),
    (models.BulkFilter, schema("BulkFilter")),
    (models.BulkJob, schema("BulkJob")),
    (models.BulkDryRun, schema("BulkDryRun")),
    (models.ReplayPreview, schema("ReplayPreview")),
    (models.Retention, schema("Retention")),
    (models.Export, schema("Export")),
    (models.ExportPart, schema("ExportPart")),
    (models.ExportCounts, schema("ExportCounts")),
    (models.WorkflowRetention, schema("WorkflowRetention")),
    (models.CheckpointBrief, schema("CheckpointBrief")),
    (models.NamedCount, schema("NamedCount")),
    (models.ExecutionStats, schema("ExecutionStats")),
    (models.Usage, schema("BillingUsage")),
    (models.Balance, schema("Balance")),
    (models.Transaction, schema("Transaction")),
    (models.Subscription, schema("Subscription")),
    (models.TopUp, response_schema("/billing/topup", "post", "200")),
    (models.CheckoutSession, response_schema("/billing/subscriptions/create-checkout", "post", "200")),
    (models.PortalSession, response_schema("/billing/subscriptions/portal", "post", "200")),
    (models.SubscriptionCancelled, response_schema("/billing/subscriptions/cancel", "post", "200")),
    (models.Key, schema("Key")),
    (models.KeyCreated, schema("KeyCreated")),
    (models.WebhookEndpoint, schema("WebhookEndpoint")),
    (models.WebhookEndpointWithSecret, schema("WebhookEndpointWithSecret")),
    (models.WebhookAttempt, schema("WebhookAttempt")),
    (models.WebhookDelivery, schema("WebhookDelivery")),
    (models.WebhookDeliveryPage, schema("WebhookDeliveryList")),
    (models.WebhookTestSent, response_schema("/webhook-endpoints/{endpoint_id}/test", "post", "202")),
]


def bucket_schema(name: str) -> dict[str, Any]:
    doc = yaml.safe_load(OPENAPI.read_text())
    return flatten(doc, schema(name)["properties"]["buckets"]["items"])


CASES += [
    (models.ExecutionBucket, bucket_schema("ExecutionStats")),
    (models.StatusCounts, flatten({}, bucket_schema("ExecutionStats")["properties"]["by_status"])),
    (models.UsageBucket, bucket_schema("BillingUsage")),
    (models.FailureGroupCounts, flatten({}, schema("FailureGroup")["properties"]["counts"])),
]


def write_item_schema() -> dict[str, Any]:
    doc = yaml.safe_load(OPENAPI.read_text())
    listed = response_schema("/checkpoints/{checkpoint_id}/writes", "get", "200")
    return flatten(doc, listed["properties"]["items"]["items"])


# The answers of the routes added for LangGraph (docs/api.md), found by route
# and read when the test runs, so one missing from the document fails alone.
LATER_CASES: list[tuple[type[BaseModel], Callable[[], dict[str, Any]]]] = [
    (models.ExecutionDeleted, lambda: response_schema("/executions/{execution_id}", "delete", "202")),
    (models.WritesStored, lambda: response_schema("/checkpoints/{checkpoint_id}/writes", "post", "200")),
    (models.CheckpointWrites, lambda: response_schema("/checkpoints/{checkpoint_id}/writes", "get", "200")),
    (models.CheckpointWrite, write_item_schema),
]


@pytest.mark.parametrize(("model", "spec"), LATER_CASES, ids=[m.__name__ for m, _ in LATER_CASES])
def test_models_of_the_langgraph_routes_match_the_openapi_document(
    model: type[BaseModel], spec: Callable[[], dict[str, Any]]
) -> None:
    test_model_fields_match_the_openapi_document(model, spec())


@pytest.mark.parametrize(("model", "spec"), CASES, ids=[m.__name__ for m, _ in CASES])
def test_model_fields_match_the_openapi_document(model: type[BaseModel], spec: dict[str, Any]) -> None:
    assert set(model.model_fields) == set(spec["properties"]), model.__name__
    # What the API always sends is required in the model, except fields it sends only
    # sometimes (the model gives them a default).
    required = {name for name, field in model.model_fields.items() if field.is_required()}
    assert required <= spec["required"], model.__name__
    optional_in_model = set(model.model_fields) - required
    sometimes = {"input", "output", "discarded_checkpoints", "resolved_at"}
    assert optional_in_model <= (set(spec["properties"]) - spec["required"]) | sometimes, model.__name__
