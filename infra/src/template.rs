//! Reads `template.yaml`: its DynamoDB tables and its HTTP API routes.
//!
//! The template is embedded at build time, so `cairn-admin` creates exactly the tables
//! of the template it was built with.

use anyhow::{Context, Result, anyhow, bail};
use serde_norway::Value;

/// The template this crate was built with.
pub const TEMPLATE: &str = include_str!("../../template.yaml");

/// The table name prefix in the template: every table is `${AWS::StackName}-<suffix>`.
const NAME_PREFIX: &str = "${AWS::StackName}-";

/// A key attribute and its role (`HASH` or `RANGE`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeyPart {
    /// Attribute name.
    pub attribute: String,
    /// `HASH` or `RANGE`.
    pub key_type: String,
}

/// A global secondary index.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IndexSpec {
    /// Index name.
    pub name: String,
    /// Its key.
    pub key: Vec<KeyPart>,
    /// `ALL`, `KEYS_ONLY` or `INCLUDE`.
    pub projection: String,
}

/// A table as the template defines it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TableSpec {
    /// The template's logical id (`WorkflowsTable`).
    pub logical_id: String,
    /// The name after the stack prefix (`workflows`).
    pub suffix: String,
    /// Key attributes and their types (`S`, `N`, `B`).
    pub attributes: Vec<(String, String)>,
    /// The primary key.
    pub key: Vec<KeyPart>,
    /// Global secondary indexes.
    pub indexes: Vec<IndexSpec>,
    /// The TTL attribute, if items expire.
    pub ttl_attribute: Option<String>,
    /// The stream's view type (`NEW_IMAGE`, …), if the table has a stream.
    pub stream_view: Option<String>,
}

/// An event source mapping from a table's stream to a function.
#[derive(Debug, Clone, PartialEq)]
pub struct StreamSource {
    /// The event's name in the template (`Outbox`).
    pub name: String,
    /// The table's name after the stack prefix (`events`).
    pub table: String,
    /// Records handed over at once, at most.
    pub batch_size: usize,
    /// Lambda's filter patterns: a record is handed over when it matches any (or when
    /// there are none).
    pub filters: Vec<serde_json::Value>,
}

/// A route of the HTTP API and the function binary that serves it.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct Route {
    /// HTTP method.
    pub method: String,
    /// Path with `{param}` placeholders.
    pub path: String,
    /// The binary (cargo-lambda `Binary`) of the function.
    pub function: String,
}

/// One permission in a function's policy: a DynamoDB action on a table, or on its
/// indexes.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Grant {
    /// `dynamodb:<Action>`.
    pub action: String,
    /// The table's name after the stack prefix (`workflows`).
    pub table: String,
    /// Whether the grant is on the table's indexes (`<arn>/index/*`) rather than the table.
    pub index: bool,
}

/// The parsed template.
#[derive(Debug)]
pub struct Template {
    root: Value,
}

impl Template {
    /// Parses template text.
    ///
    /// # Errors
    /// When the text is not YAML.
    pub fn parse(text: &str) -> Result<Self> {
        Ok(Self { root: serde_norway::from_str(text).context("template.yaml is not valid YAML")? })
    }

    /// The embedded template.
    ///
    /// # Errors
    /// When it is not YAML (a test keeps it valid).
    pub fn embedded() -> Result<Self> {
        Self::parse(TEMPLATE)
    }

    fn resources(&self) -> Result<Vec<(String, &Value)>> {
        let resources =
            self.root.get("Resources").and_then(Value::as_mapping).ok_or_else(|| anyhow!("no Resources"))?;
        Ok(resources.iter().filter_map(|(k, v)| Some((k.as_str()?.to_owned(), v))).collect())
    }

    fn of_type(&self, kind: &str) -> Result<Vec<(String, &Value)>> {
        Ok(self.resources()?.into_iter().filter(|(_, r)| r.get("Type").and_then(Value::as_str) == Some(kind)).collect())
    }

    /// Every DynamoDB table.
    ///
    /// # Errors
    /// When a table's definition is not of the expected shape.
    pub fn tables(&self) -> Result<Vec<TableSpec>> {
        self.of_type("AWS::DynamoDB::Table")?
            .into_iter()
            .map(|(id, resource)| table(&id, resource).with_context(|| format!("table {id}")))
            .collect()
    }

    /// The DynamoDB permissions the policy of the function built as `binary` grants.
    ///
    /// # Errors
    /// When the function is missing or a statement is not of the shapes the template uses
    /// (`!GetAtt <Table>.Arn`, `!Sub "${<Table>.Arn}/index/*"`, one or a list).
    pub fn grants(&self, binary: &str) -> Result<Vec<Grant>> {
        let suffixes: std::collections::HashMap<String, String> =
            self.tables()?.into_iter().map(|t| (t.logical_id, t.suffix)).collect();
        let function = self.function(binary)?;
        let mut grants = Vec::new();
        let policies = function.get("Properties").and_then(|p| p.get("Policies")).and_then(Value::as_sequence);
        for policy in policies.into_iter().flatten() {
            let statements = policy.get("Statement").and_then(Value::as_sequence);
            for statement in statements.into_iter().flatten() {
                if statement.get("Effect").and_then(Value::as_str) != Some("Allow") {
                    continue;
                }
                let actions = one_or_many(statement.get("Action"));
                for resource in one_or_many(statement.get("Resource")) {
                    let (logical_id, index) = table_resource(resource)?;
                    let table = suffixes
                        .get(&logical_id)
                        .ok_or_else(|| anyhow!("{binary}'s policy names {logical_id}, which is not a table"))?;
                    for action in &actions {
                        let action = action.as_str().ok_or_else(|| anyhow!("an action is not text"))?;
                        grants.push(Grant { action: action.to_owned(), table: table.clone(), index });
                    }
                }
            }
        }
        grants.sort();
        grants.dedup();
        Ok(grants)
    }

    /// The function built as `binary`.
    fn function(&self, binary: &str) -> Result<&Value> {
        Ok(self
            .of_type("AWS::Serverless::Function")?
            .into_iter()
            .find(|(_, f)| {
                let built = f.get("Metadata").and_then(|m| m.get("BuildProperties")).and_then(|b| b.get("Binary"));
                built.and_then(Value::as_str) == Some(binary)
            })
            .ok_or_else(|| anyhow!("no function is built as {binary}"))?
            .1)
    }

    /// The DynamoDB streams that feed the function built as `binary` (its event source
    /// mappings), in the template's order.
    ///
    /// # Errors
    /// When the function is missing or an event is not of the shape the template uses
    /// (`Stream: !GetAtt <Table>.StreamArn`, `BatchSize`, JSON filter patterns).
    pub fn stream_sources(&self, binary: &str) -> Result<Vec<StreamSource>> {
        let suffixes: std::collections::HashMap<String, String> =
            self.tables()?.into_iter().map(|t| (t.logical_id, t.suffix)).collect();
        let events = self.function(binary)?.get("Properties").and_then(|p| p.get("Events")).and_then(Value::as_mapping);
        let mut sources = Vec::new();
        for (name, event) in events.into_iter().flatten() {
            if event.get("Type").and_then(Value::as_str) != Some("DynamoDB") {
                continue;
            }
            let name = name.as_str().unwrap_or_default();
            let props = event.get("Properties").ok_or_else(|| anyhow!("event {name} without Properties"))?;
            let Some(Value::Tagged(stream)) = props.get("Stream") else { bail!("event {name}: Stream is not !GetAtt") };
            let stream = stream.value.as_str().unwrap_or_default();
            let logical_id = stream
                .strip_suffix(".StreamArn")
                .ok_or_else(|| anyhow!("event {name}: {stream} is not a table's StreamArn"))?;
            let table = suffixes.get(logical_id).ok_or_else(|| anyhow!("event {name}: no table {logical_id}"))?;
            let batch_size = props
                .get("BatchSize")
                .and_then(Value::as_u64)
                .ok_or_else(|| anyhow!("event {name} without BatchSize"))?;
            let patterns = props.get("FilterCriteria").and_then(|f| f.get("Filters")).and_then(Value::as_sequence);
            let filters = patterns
                .into_iter()
                .flatten()
                .map(|filter| {
                    let pattern = text_of(filter.get("Pattern"), "Pattern")?;
                    serde_json::from_str(&pattern).with_context(|| format!("event {name}: a pattern is not JSON"))
                })
                .collect::<Result<Vec<_>>>()?;
            sources.push(StreamSource {
                name: name.to_owned(),
                table: table.clone(),
                batch_size: usize::try_from(batch_size)?,
                filters,
            });
        }
        Ok(sources)
    }

    /// Every HTTP API route with its method and function (the `ANY` routes aside).
    ///
    /// # Errors
    /// When a function or event is not of the expected shape.
    pub fn routes(&self) -> Result<Vec<Route>> {
        Ok(self.all_routes()?.into_iter().filter(|r| r.method != ANY).collect())
    }

    /// The `ANY` routes: one per path, sending the methods the path does not serve to its
    /// function (which answers 405).
    ///
    /// # Errors
    /// As [`Template::routes`].
    pub fn any_method_routes(&self) -> Result<Vec<Route>> {
        Ok(self.all_routes()?.into_iter().filter(|r| r.method == ANY).collect())
    }

    fn all_routes(&self) -> Result<Vec<Route>> {
        let mut routes = Vec::new();
        for (id, function) in self.of_type("AWS::Serverless::Function")? {
            let binary = function
                .get("Metadata")
                .and_then(|m| m.get("BuildProperties"))
                .and_then(|b| b.get("Binary"))
                .and_then(Value::as_str)
                .ok_or_else(|| anyhow!("function {id} has no Metadata.BuildProperties.Binary"))?;
            let events = function.get("Properties").and_then(|p| p.get("Events")).and_then(Value::as_mapping);
            for (_, event) in events.into_iter().flatten() {
                if event.get("Type").and_then(Value::as_str) != Some("HttpApi") {
                    continue;
                }
                let props = event.get("Properties").ok_or_else(|| anyhow!("event of {id} without Properties"))?;
                let text = |name: &str| {
                    props
                        .get(name)
                        .and_then(Value::as_str)
                        .map(str::to_owned)
                        .ok_or_else(|| anyhow!("event of {id} without {name}"))
                };
                routes.push(Route {
                    method: text("Method")?.to_uppercase(),
                    path: text("Path")?,
                    function: binary.to_owned(),
                });
            }
        }
        routes.sort();
        Ok(routes)
    }
}

fn one_or_many(value: Option<&Value>) -> Vec<&Value> {
    match value {
        Some(Value::Sequence(list)) => list.iter().collect(),
        Some(one) => vec![one],
        None => Vec::new(),
    }
}

/// `!GetAtt XTable.Arn` (the table) or `!Sub "${XTable.Arn}/index/*"` (its indexes).
fn table_resource(resource: &Value) -> Result<(String, bool)> {
    let Value::Tagged(tagged) = resource else { bail!("a policy resource is not !GetAtt or !Sub: {resource:?}") };
    let text = tagged.value.as_str().ok_or_else(|| anyhow!("a policy resource is not text"))?;
    let tag = tagged.tag.to_string();
    if tag.ends_with("GetAtt") {
        let id = text.strip_suffix(".Arn").ok_or_else(|| anyhow!("!GetAtt {text} is not a table's Arn"))?;
        return Ok((id.to_owned(), false));
    }
    let id = text
        .strip_prefix("${")
        .and_then(|t| t.strip_suffix(".Arn}/index/*"))
        .ok_or_else(|| anyhow!("!Sub {text} is not a table's indexes"))?;
    Ok((id.to_owned(), true))
}

/// API Gateway's method wildcard.
const ANY: &str = "ANY";

fn text_of(value: Option<&Value>, what: &str) -> Result<String> {
    value.and_then(Value::as_str).map(str::to_owned).ok_or_else(|| anyhow!("missing {what}"))
}

fn key_parts(value: Option<&Value>) -> Result<Vec<KeyPart>> {
    let list = value.and_then(Value::as_sequence).ok_or_else(|| anyhow!("missing KeySchema"))?;
    list.iter()
        .map(|part| {
            Ok(KeyPart {
                attribute: text_of(part.get("AttributeName"), "AttributeName")?,
                key_type: text_of(part.get("KeyType"), "KeyType")?,
            })
        })
        .collect()
}

fn table(id: &str, resource: &Value) -> Result<TableSpec> {
    let props = resource.get("Properties").ok_or_else(|| anyhow!("no Properties"))?;
    let name = match props.get("TableName") {
        Some(Value::Tagged(tagged)) if tagged.tag == "!Sub" || tagged.tag == "Sub" => {
            text_of(Some(&tagged.value), "TableName")?
        }
        _ => bail!("TableName must be !Sub \"{NAME_PREFIX}<name>\""),
    };
    let suffix =
        name.strip_prefix(NAME_PREFIX).ok_or_else(|| anyhow!("TableName {name} does not start with {NAME_PREFIX}"))?;
    let attributes = props
        .get("AttributeDefinitions")
        .and_then(Value::as_sequence)
        .ok_or_else(|| anyhow!("missing AttributeDefinitions"))?
        .iter()
        .map(|a| {
            Ok((text_of(a.get("AttributeName"), "AttributeName")?, text_of(a.get("AttributeType"), "AttributeType")?))
        })
        .collect::<Result<Vec<_>>>()?;
    let indexes = props
        .get("GlobalSecondaryIndexes")
        .and_then(Value::as_sequence)
        .into_iter()
        .flatten()
        .map(|index| {
            Ok(IndexSpec {
                name: text_of(index.get("IndexName"), "IndexName")?,
                key: key_parts(index.get("KeySchema"))?,
                projection: text_of(index.get("Projection").and_then(|p| p.get("ProjectionType")), "ProjectionType")?,
            })
        })
        .collect::<Result<Vec<_>>>()?;
    let ttl = props.get("TimeToLiveSpecification");
    let ttl_attribute = match ttl {
        Some(spec) if spec.get("Enabled").and_then(Value::as_bool) == Some(true) => {
            Some(text_of(spec.get("AttributeName"), "TimeToLiveSpecification.AttributeName")?)
        }
        _ => None,
    };
    let stream_view = match props.get("StreamSpecification") {
        Some(spec) => Some(text_of(spec.get("StreamViewType"), "StreamSpecification.StreamViewType")?),
        None => None,
    };
    Ok(TableSpec {
        logical_id: id.to_owned(),
        suffix: suffix.to_owned(),
        attributes,
        key: key_parts(props.get("KeySchema"))?,
        indexes,
        ttl_attribute,
        stream_view,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_embedded_template_defines_every_table_the_code_names() {
        let template = Template::embedded().expect("valid template");
        let mut in_template: Vec<String> = template.tables().expect("tables").into_iter().map(|t| t.suffix).collect();
        let mut in_code: Vec<String> = shared::dynamo::Table::ALL.iter().map(|t| t.suffix().to_owned()).collect();
        in_template.sort();
        in_code.sort();
        assert_eq!(in_template, in_code);
    }

    #[test]
    fn every_table_s_key_is_the_one_the_code_names() {
        let specs = Template::embedded().expect("valid template").tables().expect("tables");
        for table in shared::dynamo::Table::ALL {
            let spec = specs.iter().find(|t| t.suffix == table.suffix()).expect("the table");
            let key: Vec<&str> = spec.key.iter().map(|part| part.attribute.as_str()).collect();
            assert_eq!(key, table.key(), "{}", table.suffix());
        }
    }

    #[test]
    fn the_dispatcher_reads_the_outbox_executions_and_checkpoints_streams_new_items_only() {
        let template = Template::embedded().expect("valid template");
        let sources = template.stream_sources("dispatcher").expect("stream sources");
        let tables: Vec<&str> = sources.iter().map(|s| s.table.as_str()).collect();
        assert_eq!(tables, ["events", "executions", "checkpoints"]);
        let specs = template.tables().expect("tables");
        for source in &sources {
            let spec = specs.iter().find(|t| t.suffix == source.table).expect("the table");
            assert_eq!(spec.stream_view.as_deref(), Some("NEW_IMAGE"), "{}", source.table);
            assert!(source.filters.iter().all(|f| f["eventName"] == serde_json::json!(["INSERT"])), "{}", source.name);
            assert!(!source.filters.is_empty());
        }
        assert!(template.stream_sources("workflows").expect("none").is_empty());
    }

    #[test]
    fn a_table_name_without_the_stack_prefix_is_refused() {
        let text = "Resources:\n  T:\n    Type: AWS::DynamoDB::Table\n    Properties:\n      TableName: plain\n      AttributeDefinitions: []\n      KeySchema: []\n";
        let error = Template::parse(text).expect("yaml").tables().expect_err("refused");
        assert!(format!("{error:#}").contains("TableName"), "{error:#}");
    }
}
