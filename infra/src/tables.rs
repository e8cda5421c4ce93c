//! Creates the template's tables in DynamoDB (Local), and describes existing ones so a
//! test can compare them with the template.

use anyhow::{Context, Result, anyhow};
use aws_sdk_dynamodb::Client;
use aws_sdk_dynamodb::types::{
    AttributeDefinition, BillingMode, GlobalSecondaryIndex, KeySchemaElement, KeyType, Projection, ProjectionType,
    ScalarAttributeType, TimeToLiveSpecification,
};

use crate::template::{IndexSpec, KeyPart, TableSpec, Template};

fn key_schema(parts: &[KeyPart]) -> Result<Vec<KeySchemaElement>> {
    parts
        .iter()
        .map(|p| {
            KeySchemaElement::builder()
                .attribute_name(&p.attribute)
                .key_type(KeyType::from(p.key_type.as_str()))
                .build()
                .context("key schema")
        })
        .collect()
}

fn index(spec: &IndexSpec) -> Result<GlobalSecondaryIndex> {
    GlobalSecondaryIndex::builder()
        .index_name(&spec.name)
        .set_key_schema(Some(key_schema(&spec.key)?))
        .projection(Projection::builder().projection_type(ProjectionType::from(spec.projection.as_str())).build())
        .build()
        .context("index")
}

/// Creates every table of the embedded template that does not exist yet, named
/// `prefix` + suffix, and turns on TTL where the template does. Returns the names of the
/// tables it created.
///
/// # Errors
/// When DynamoDB refuses a table or cannot be reached.
pub async fn create_missing(client: &Client, prefix: &str) -> Result<Vec<String>> {
    let existing = list(client).await?;
    let mut created = Vec::new();
    for spec in Template::embedded()?.tables()? {
        let name = format!("{prefix}{}", spec.suffix);
        if existing.contains(&name) {
            add_missing_indexes(client, &name, &spec).await.with_context(|| format!("updating table {name}"))?;
            add_missing_stream(client, &name, &spec).await.with_context(|| format!("updating table {name}"))?;
            continue;
        }
        create(client, &name, &spec).await.with_context(|| format!("creating table {name}"))?;
        created.push(name);
    }
    Ok(created)
}

async fn list(client: &Client) -> Result<Vec<String>> {
    let mut names = Vec::new();
    let mut start = None;
    loop {
        let out = client.list_tables().set_exclusive_start_table_name(start).send().await.context("listing tables")?;
        names.extend(out.table_names.unwrap_or_default());
        start = out.last_evaluated_table_name;
        if start.is_none() {
            return Ok(names);
        }
    }
}

/// Turns on the template's stream on an existing table that has none (a local table
/// made before the stream was).
async fn add_missing_stream(client: &Client, name: &str, spec: &TableSpec) -> Result<()> {
    let Some(view) = &spec.stream_view else { return Ok(()) };
    let table = client.describe_table().table_name(name).send().await?.table.ok_or_else(|| anyhow!("no table"))?;
    if table.stream_specification().is_some_and(|s| s.stream_enabled()) {
        return Ok(());
    }
    let stream = aws_sdk_dynamodb::types::StreamSpecification::builder()
        .stream_enabled(true)
        .stream_view_type(aws_sdk_dynamodb::types::StreamViewType::from(view.as_str()))
        .build()?;
    client.update_table().table_name(name).stream_specification(stream).send().await?;
    Ok(())
}

/// Adds the template's indexes that an existing table lacks (a local table made
/// before the index was), one at a time, as DynamoDB requires.
async fn add_missing_indexes(client: &Client, name: &str, spec: &TableSpec) -> Result<()> {
    let table = client.describe_table().table_name(name).send().await?.table.ok_or_else(|| anyhow!("no table"))?;
    let present: Vec<&str> = table.global_secondary_indexes().iter().filter_map(|i| i.index_name()).collect();
    for missing in spec.indexes.iter().filter(|i| !present.contains(&i.name.as_str())) {
        let created = index(missing)?;
        let update = aws_sdk_dynamodb::types::CreateGlobalSecondaryIndexAction::builder()
            .index_name(created.index_name())
            .set_key_schema(Some(created.key_schema().to_vec()))
            .set_projection(created.projection().cloned())
            .build()
            .context("index update")?;
        client
            .update_table()
            .table_name(name)
            .set_attribute_definitions(Some(attribute_definitions(spec)?))
            .global_secondary_index_updates(
                aws_sdk_dynamodb::types::GlobalSecondaryIndexUpdate::builder().create(update).build(),
            )
            .send()
            .await?;
    }
    Ok(())
}

fn attribute_definitions(spec: &TableSpec) -> Result<Vec<AttributeDefinition>> {
    spec.attributes
        .iter()
        .map(|(attribute, kind)| {
            AttributeDefinition::builder()
                .attribute_name(attribute)
                .attribute_type(ScalarAttributeType::from(kind.as_str()))
                .build()
                .context("attribute definition")
        })
        .collect()
}

async fn create(client: &Client, name: &str, spec: &TableSpec) -> Result<()> {
    let attributes = attribute_definitions(spec)?;
    let indexes = spec.indexes.iter().map(index).collect::<Result<Vec<_>>>()?;
    client
        .create_table()
        .table_name(name)
        .billing_mode(BillingMode::PayPerRequest)
        .set_attribute_definitions(Some(attributes))
        .set_key_schema(Some(key_schema(&spec.key)?))
        .set_global_secondary_indexes((!indexes.is_empty()).then_some(indexes))
        .set_stream_specification(
            spec.stream_view
                .as_deref()
                .map(|view| {
                    aws_sdk_dynamodb::types::StreamSpecification::builder()
                        .stream_enabled(true)
                        .stream_view_type(aws_sdk_dynamodb::types::StreamViewType::from(view))
                        .build()
                })
                .transpose()?,
        )
        .send()
        .await?;
    if let Some(attribute) = &spec.ttl_attribute {
        client
            .update_time_to_live()
            .table_name(name)
            .time_to_live_specification(
                TimeToLiveSpecification::builder().enabled(true).attribute_name(attribute).build()?,
            )
            .send()
            .await?;
    }
    Ok(())
}

/// Reads back an existing table as a [`TableSpec`] (with the given logical id and
/// suffix), for comparison with the template.
///
/// # Errors
/// When the table does not exist or cannot be described.
pub async fn describe(client: &Client, name: &str, logical_id: &str, suffix: &str) -> Result<TableSpec> {
    let table =
        client.describe_table().table_name(name).send().await?.table.ok_or_else(|| anyhow!("no table {name}"))?;
    let parts = |schema: &[KeySchemaElement]| {
        schema
            .iter()
            .map(|k| KeyPart { attribute: k.attribute_name().to_owned(), key_type: k.key_type().as_str().to_owned() })
            .collect::<Vec<_>>()
    };
    let ttl = client.describe_time_to_live().table_name(name).send().await?;
    let ttl_attribute = ttl
        .time_to_live_description
        .filter(|d| d.time_to_live_status().is_some_and(|s| s.as_str() == "ENABLED" || s.as_str() == "ENABLING"))
        .and_then(|d| d.attribute_name);
    Ok(TableSpec {
        logical_id: logical_id.to_owned(),
        suffix: suffix.to_owned(),
        attributes: table
            .attribute_definitions()
            .iter()
            .map(|a| (a.attribute_name().to_owned(), a.attribute_type().as_str().to_owned()))
            .collect(),
        key: parts(table.key_schema()),
        indexes: table
            .global_secondary_indexes()
            .iter()
            .map(|i| IndexSpec {
                name: i.index_name().unwrap_or_default().to_owned(),
                key: parts(i.key_schema()),
                projection: i
                    .projection()
                    .and_then(|p| p.projection_type())
                    .map(|p| p.as_str().to_owned())
                    .unwrap_or_default(),
            })
            .collect(),
        ttl_attribute,
        stream_view: table
            .stream_specification()
            .filter(|s| s.stream_enabled())
            .and_then(|s| s.stream_view_type())
            .map(|v| v.as_str().to_owned()),
    })
}
