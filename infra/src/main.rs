//! `cairn-admin`: the dashboard's stand-in for operators and the local stack.
//!
//! Talks to DynamoDB through the SDK's full default configuration chain (`AWS_REGION`,
//! credentials, `AWS_ENDPOINT_URL_DYNAMODB` for DynamoDB Local) and `TABLE_PREFIX`.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{Context, Result, bail};
use clap::{Parser, Subcommand};
use infra::admin::{self, Revoked};
use shared::config::Config;
use shared::dynamo::Tables;

#[derive(Debug, Parser)]
#[command(name = "cairn-admin", about = "Manage Cairn tenants, API keys and tables")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Tenants.
    Tenant {
        #[command(subcommand)]
        command: TenantCommand,
    },
    /// API keys.
    Key {
        #[command(subcommand)]
        command: KeyCommand,
    },
    /// Credits.
    Credits {
        #[command(subcommand)]
        command: CreditsCommand,
    },
    /// Tables.
    Tables {
        #[command(subcommand)]
        command: TablesCommand,
    },
    /// One-off steps of an upgrade.
    Migrate {
        #[command(subcommand)]
        command: MigrateCommand,
    },
    /// Finishes the deletions clients left unfinished (a 202 not followed up for 10
    /// minutes) and deletes the tenants that asked for it, as the scheduled janitor
    /// function does; for the local stack, which has
    /// no scheduler.
    Janitor,
    /// Starts executions at a past time and leaves them in a status, through the API's
    /// own operations (charged, failures recorded): a history for the dashboard's charts
    /// in the demo and the tests.
    History {
        /// The tenant's id.
        #[arg(long)]
        tenant: String,
        /// Their workflow (default: a new published workflow "Backfilled history").
        #[arg(long)]
        workflow: Option<String>,
        /// When they start and end (RFC 3339, in the past).
        #[arg(long)]
        at: String,
        /// running, completed, failed, cancelled or paused.
        #[arg(long)]
        status: String,
        /// How many (1 to 1000).
        #[arg(long, default_value_t = 1)]
        count: u32,
    },
    /// Makes sure a demo tenant with a live key and credits exists and prints the key
    /// (kept in FILE with the tenant id, so the same key is printed on the next run).
    Demo {
        /// Where the demo key is kept between runs.
        #[arg(long, value_name = "FILE")]
        key_file: PathBuf,
    },
}

#[derive(Debug, Subcommand)]
enum TenantCommand {
    /// Creates a tenant and prints its id.
    Create {
        /// Display name.
        #[arg(long)]
        name: String,
    },
    /// Deletes a tenant and everything it owns in every table, its keys revoked first;
    /// prints a report (JSON) of what was deleted and when. Refused while the tenant has
    /// a live subscription (docs/retention.md, "Deleting a tenant").
    Delete {
        /// The tenant's id.
        #[arg(long)]
        tenant: String,
        /// Confirms: the deletion cannot be undone.
        #[arg(long)]
        yes: bool,
    },
}

#[derive(Debug, Subcommand)]
enum KeyCommand {
    /// Issues a key and prints it, alone, on stdout. It is shown only this once.
    Create {
        /// The tenant's id.
        #[arg(long)]
        tenant: String,
    },
    /// Lists a tenant's keys (never the keys themselves).
    List {
        /// The tenant's id.
        #[arg(long)]
        tenant: String,
    },
    /// Revokes a key by its id.
    Revoke {
        /// The key's id (key_…).
        #[arg(long)]
        key_id: String,
    },
}

#[derive(Debug, Subcommand)]
enum CreditsCommand {
    /// Grants credits (1 credit = US$0.01): a topup transaction described as a manual
    /// grant. Prints the new balance.
    Grant {
        /// The tenant's id.
        #[arg(long)]
        tenant: String,
        /// Credits to add.
        #[arg(long)]
        credits: i64,
    },
    /// Sets the balance below which a charge sends the tenant's webhooks `credits.low`
    /// (default 100).
    LowThreshold {
        /// The tenant's id.
        #[arg(long)]
        tenant: String,
        /// The threshold in credits (0 to 10000000).
        #[arg(long)]
        credits: i64,
    },
}

#[derive(Debug, Subcommand)]
enum TablesCommand {
    /// Creates the tables of template.yaml that do not exist yet.
    Create,
}

#[derive(Debug, Subcommand)]
enum MigrateCommand {
    /// Mirrors the hidden checkpoints of unfinished rollbacks and deletions into each
    /// tenant's hidden item, which `GET /checkpoints/{id}` reads, and puts unfinished
    /// deletions into the janitor's index (for data written before they existed). Safe
    /// to run while the service runs, and again.
    HiddenCheckpoints {
        /// Only this tenant's (default: every tenant's, one scan of the table).
        #[arg(long)]
        tenant: Option<String>,
    },
    /// Moves the counters of earlier layouts (behind every list total and chart: one item
    /// per tenant and counter, or every counter of a shard in one partition; usage and a
    /// day's attempts in items of their own) into this one: a partition per counter item
    /// and shard, usage and attempts attributes of the executions' span items. Run once
    /// right after deploying a version that changed the layout; safe while the service
    /// runs, and again.
    CounterShards {
        /// Only this tenant's (default: every tenant's; one scan of the table either way).
        #[arg(long)]
        tenant: Option<String>,
    },
    /// Gives workflows written before the `by_name` index its key (`tenant_name`), so
    /// `GET /workflows?name=` finds them. Run once right after deploying the index; safe
    /// while the service runs, and again.
    WorkflowNames {
        /// Only this tenant's (default: every tenant's, one scan of the table).
        #[arg(long)]
        tenant: Option<String>,
    },
    /// Gives failures recorded before failure groups their fingerprint, group and entry
    /// in the `by_group` index, so `GET /failures?group_id=` finds them, then counts
    /// each failure recorded before the groups' counter items in its group. Run once
    /// right after deploying a version that brought either; safe while the service
    /// runs, and again.
    FailureGroups {
        /// Only this tenant's (default: every tenant's, one scan of the table).
        #[arg(long)]
        tenant: Option<String>,
    },
    /// Gives executions that ended before retention existed their lifetimes, from
    /// their tenant's (or workflow's) retention now, counted from their end but never
    /// sooner than 7 days from now, and their expiry markers. Run once right after
    /// deploying retention; safe while the service runs, and again.
    Lifetimes {
        /// Only this tenant's (default: every tenant's, one scan of the table).
        #[arg(long)]
        tenant: Option<String>,
    },
}

/// The tenant `--tenant` names, if it does.
fn named_tenant(id: Option<&str>) -> Result<Option<shared::TenantId>> {
    id.map(|id| {
        let key = shared::ids::TenantKey::parse(id).with_context(|| format!("unknown tenant {id}"))?;
        Ok(shared::auth::trusted::tenant(&key))
    })
    .transpose()
}

#[tokio::main]
async fn main() -> ExitCode {
    match run(Cli::parse()).await {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("cairn-admin: {error:#}");
            ExitCode::FAILURE
        }
    }
}

fn now() -> String {
    shared::time::format(chrono::Utc::now())
}

async fn run(cli: Cli) -> Result<()> {
    let config = Config::from_env()?;
    let client = shared::dynamo::client_with_default_chain().await;
    let tables = &config.tables;
    match cli.command {
        Command::Tenant { command: TenantCommand::Create { name } } => {
            println!("{}", admin::create_tenant(&client, tables, &name, &now()).await?);
        }
        Command::Tenant { command: TenantCommand::Delete { tenant, yes } } => {
            if !yes {
                bail!("deleting {tenant} cannot be undone: add --yes");
            }
            let report = infra::erasure::delete_tenant(&client, tables, &tenant).await?;
            eprintln!("deleted {tenant}: {} items in {} passes", report.total, report.passes);
            println!("{}", serde_json::to_string_pretty(&report)?);
        }
        Command::Key { command: KeyCommand::Create { tenant } } => {
            let (id, key) = admin::create_key(&client, tables, &tenant, &now()).await?;
            eprintln!("issued {id} for {tenant}; the key is shown only now");
            println!("{key}");
        }
        Command::Key { command: KeyCommand::List { tenant } } => {
            let keys = admin::list_keys(&client, tables, &tenant).await?;
            println!("{:<40} {:<12} {:<26} STATUS", "KEY_ID", "PREFIX", "CREATED_AT");
            for key in keys {
                let status = key.revoked_at.map_or_else(|| "live".to_owned(), |at| format!("revoked {at}"));
                println!("{:<40} {:<12} {:<26} {status}", key.key_id, key.key_prefix, key.created_at);
            }
        }
        Command::Key { command: KeyCommand::Revoke { key_id } } => {
            match admin::revoke_key(&client, tables, &key_id, &now()).await? {
                Revoked::Now => eprintln!("revoked {key_id}"),
                Revoked::Already => eprintln!("{key_id} was already revoked"),
            }
        }
        Command::Credits { command: CreditsCommand::Grant { tenant, credits } } => {
            println!("{}", admin::grant_credits(&client, tables, &tenant, credits).await?);
        }
        Command::Credits { command: CreditsCommand::LowThreshold { tenant, credits } } => {
            admin::set_low_balance_threshold(&client, tables, &tenant, credits).await?;
            eprintln!("credits.low is sent when a charge takes {tenant}'s balance below {credits}");
        }
        Command::Tables { command: TablesCommand::Create } => {
            let prefix = std::env::var("TABLE_PREFIX").context("TABLE_PREFIX")?;
            for name in infra::tables::create_missing(&client, &prefix).await? {
                eprintln!("created table {name}");
            }
        }
        Command::Migrate { command: MigrateCommand::HiddenCheckpoints { tenant } } => {
            let tenant = named_tenant(tenant.as_deref())?;
            let runs =
                domain::runs::Runs::new(client.clone(), tables.clone(), shared::config::execution_cost_credits());
            let found = runs.mirror_hidden(tenant.as_ref(), chrono::Utc::now()).await?;
            eprintln!("mirrored the hidden checkpoints of {found} executions");
        }
        Command::Migrate { command: MigrateCommand::Lifetimes { tenant } } => {
            let tenant = named_tenant(tenant.as_deref())?;
            let runs =
                domain::runs::Runs::new(client.clone(), tables.clone(), shared::config::execution_cost_credits());
            let done = runs.give_lifetimes(tenant.as_ref(), chrono::Utc::now()).await?;
            eprintln!("gave lifetimes to {} of {} ended executions found without them", done.given, done.found);
        }
        Command::Migrate { command: MigrateCommand::CounterShards { tenant } } => {
            if let Some(id) = &tenant {
                shared::ids::TenantKey::parse(id).with_context(|| format!("unknown tenant {id}"))?;
            }
            let folded = shared::counter_layouts::fold_legacy(&client, tables, tenant.as_deref()).await?;
            eprintln!("moved {folded} counter items of earlier layouts into their partitions");
        }
        Command::Migrate { command: MigrateCommand::WorkflowNames { tenant } } => {
            if let Some(id) = &tenant {
                shared::ids::TenantKey::parse(id).with_context(|| format!("unknown tenant {id}"))?;
            }
            let store = domain::workflows::store::WorkflowStore::new(client.clone(), tables.clone());
            let changed = store.index_names(tenant.as_deref()).await?;
            eprintln!("indexed the names of {changed} workflows");
        }
        Command::Migrate { command: MigrateCommand::FailureGroups { tenant } } => {
            if let Some(id) = &tenant {
                shared::ids::TenantKey::parse(id).with_context(|| format!("unknown tenant {id}"))?;
            }
            let store = domain::runs::failures::store::FailureStore::new(client.clone(), tables.clone());
            let changed = store.index_groups(tenant.as_deref()).await?;
            eprintln!("grouped {changed} failures");
            let counted = store.count_in_groups(tenant.as_deref()).await?;
            eprintln!("counted {counted} failures in their groups");
        }
        Command::Janitor => {
            let runs =
                domain::runs::Runs::new(client.clone(), tables.clone(), shared::config::execution_cost_credits());
            let done = runs.finish_deletions(&shared::time::SystemClock, || true).await?;
            eprintln!("finished {} deletions in {} rounds ({} failed)", done.finished, done.rounds, done.failed);
            let erasures = domain::erasure::Erasures::new(client.clone(), tables.clone());
            let erased = erasures.run(chrono::Utc::now(), &|| true).await?;
            eprintln!("deleted {} tenants that asked, in {} steps", erased.finished, erased.steps);
        }
        Command::History { tenant, workflow, at, status, count } => {
            use shared::body::WireEnum;
            let at = shared::time::parse(&at).map_err(|e| anyhow::anyhow!("--at: {e}"))?;
            let status = domain::runs::executions::model::ExecutionStatus::from_wire(&status)
                .with_context(|| format!("--status {status}: not a status"))?;
            let made = admin::History { at, status, count };
            println!("{}", Box::pin(admin::history(&client, tables, &tenant, workflow.as_deref(), made)).await?);
        }
        Command::Demo { key_file } => println!("{}", demo(&client, tables, &key_file).await?),
    }
    Ok(())
}

async fn demo(client: &aws_sdk_dynamodb::Client, tables: &Tables, key_file: &std::path::Path) -> Result<String> {
    let saved = std::fs::read_to_string(key_file).unwrap_or_default();
    let saved = saved.split_whitespace().collect::<Vec<_>>();
    if let [tenant, key] = saved.as_slice()
        && let Some(tenant) = shared::ids::TenantKey::parse(tenant)
        && admin::key_is_live(client, tables, key).await?
    {
        top_up_demo(client, tables, &tenant).await?;
        return Ok((*key).to_owned());
    }
    let tenant = admin::create_tenant(client, tables, "Demo tenant", &now()).await?;
    let (_, key) = admin::create_key(client, tables, tenant.as_str(), &now()).await?;
    if let Some(dir) = key_file.parent() {
        std::fs::create_dir_all(dir)?;
    }
    std::fs::write(key_file, format!("{tenant} {key}\n")).with_context(|| format!("writing {}", key_file.display()))?;
    eprintln!("created demo tenant {tenant}");
    top_up_demo(client, tables, &tenant).await?;
    demo_history(client, tables, &tenant).await?;
    top_up_demo(client, tables, &tenant).await?;
    Ok(key)
}

/// Two weeks of runs for a new demo tenant, so that the dashboard's overview has a
/// history to show: each day a few completed, some failed, now and then a cancelled one.
async fn demo_history(
    client: &aws_sdk_dynamodb::Client,
    tables: &Tables,
    tenant: &shared::ids::TenantKey,
) -> Result<()> {
    use domain::runs::executions::model::ExecutionStatus;
    let today = chrono::Utc::now().date_naive().and_hms_opt(0, 0, 0).context("midnight")?.and_utc();
    let mut workflow = None;
    for day in 1..=14_u32 {
        let noon = today - chrono::TimeDelta::days(i64::from(day)) + chrono::TimeDelta::hours(12);
        let runs = [
            (ExecutionStatus::Completed, 3 + (day * 7) % 5),
            (ExecutionStatus::Failed, (day * 5) % 3),
            (ExecutionStatus::Cancelled, u32::from(day % 4 == 0)),
        ];
        for (status, count) in runs.into_iter().filter(|(_, count)| *count > 0) {
            let made = admin::History { at: noon, status, count };
            workflow =
                Some(Box::pin(admin::history(client, tables, tenant.as_str(), workflow.as_deref(), made)).await?);
        }
    }
    eprintln!("gave the demo tenant two weeks of history");
    Ok(())
}

/// Credits the demo tenant starts with (and is topped up to when it runs low).
const DEMO_CREDITS: i64 = 1000;

async fn top_up_demo(
    client: &aws_sdk_dynamodb::Client,
    tables: &Tables,
    tenant: &shared::ids::TenantKey,
) -> Result<()> {
    let balance = admin::balance(client, tables, tenant).await?;
    if balance < DEMO_CREDITS / 10 {
        let after = admin::grant_credits(client, tables, tenant.as_str(), DEMO_CREDITS - balance).await?;
        eprintln!("granted the demo tenant credits; balance {after}");
    }
    Ok(())
}
