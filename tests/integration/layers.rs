//! The layering rules of ARCHITECTURE.md, checked against `cargo metadata`:
//! no library crate depends on the command-line crate or on a terminal
//! crate, and every edge between agent-host's own crates is one the table
//! allows.

use std::collections::BTreeMap;

use cargo_metadata::{DependencyKind, MetadataCommand};

/// Crates only the command line may use.
const FRONT_END_ONLY: [&str; 4] = ["clap", "rustyline", "indicatif", "agent-host"];

/// Each library crate and the agent-host crates it may depend on (normal
/// dependencies). Dev-dependencies are free: tests may use anything.
const ALLOWED: [(&str, &[&str]); 13] = [
    ("agent-host-core", &[]),
    ("agent-host-core-js", &["agent-host-core"]),
    ("agent-host-runtime", &["agent-host-core"]),
    ("agent-host-store", &["agent-host-core"]),
    ("agent-host-provider", &["agent-host-core"]),
    (
        "agent-host-engine",
        &[
            "agent-host-core",
            "agent-host-runtime",
            "agent-host-store",
            "agent-host-provider",
        ],
    ),
    (
        "agent-host-config",
        &[
            "agent-host-core",
            "agent-host-runtime",
            "agent-host-store",
            "agent-host-provider",
            "agent-host-engine",
        ],
    ),
    ("agent-host-api", &["agent-host-core", "agent-host-store"]),
    (
        "agent-host-server",
        &[
            "agent-host-core",
            "agent-host-runtime",
            "agent-host-store",
            "agent-host-provider",
            "agent-host-engine",
            "agent-host-api",
        ],
    ),
    (
        "agent-host-python",
        &[
            "agent-host-core",
            "agent-host-runtime",
            "agent-host-store",
            "agent-host-engine",
            "agent-host-api",
        ],
    ),
    ("agent-host-tools", &[]),
    ("agent-host-testkit", &[]),
    ("agent-host-guest", &["agent-host-core"]),
];

/// Workspace packages that are not libraries of the layer table: the
/// command line itself, and the crate that builds the test guests. Any
/// other package must be in [`ALLOWED`], so a new crate cannot slip past.
const NOT_LAYERS: [&str; 2] = ["agent-host", "agent-host-test-artifacts"];

/// What is wrong with the workspace's dependency edges, one line each.
fn violations(packages: &BTreeMap<String, Vec<(String, bool)>>) -> Vec<String> {
    let mut wrong = Vec::new();
    for name in packages.keys() {
        let known = ALLOWED.iter().any(|(n, _)| n == name) || NOT_LAYERS.contains(&name.as_str());
        if !known {
            wrong.push(format!(
                "{name} is in no row of the layer table (ARCHITECTURE.md)"
            ));
        }
    }
    for (name, allowed) in ALLOWED {
        let Some(deps) = packages.get(name) else {
            wrong.push(format!("{name} is not in the workspace"));
            continue;
        };
        for (dep, optional) in deps {
            // A settings crate may offer clap derives behind a feature the
            // command line turns on; nothing else may.
            let optional_clap = *optional && dep == "clap" && name == "agent-host-config";
            if FRONT_END_ONLY.contains(&dep.as_str()) && !optional_clap {
                wrong.push(format!(
                    "{name} depends on {dep}, which only the command line may use"
                ));
            }
            if dep.starts_with("agent-host")
                && !FRONT_END_ONLY.contains(&dep.as_str())
                && !allowed.contains(&dep.as_str())
            {
                wrong.push(format!(
                    "{name} depends on {dep}, which ARCHITECTURE.md does not allow"
                ));
            }
        }
    }
    wrong
}

/// Each workspace package's normal and build dependencies: (name, optional).
fn workspace_dependencies() -> BTreeMap<String, Vec<(String, bool)>> {
    let metadata = MetadataCommand::new()
        .manifest_path(concat!(env!("CARGO_MANIFEST_DIR"), "/../../Cargo.toml"))
        .no_deps()
        .exec()
        .expect("cargo metadata runs");
    metadata
        .workspace_packages()
        .into_iter()
        .map(|p| {
            let deps = p
                .dependencies
                .iter()
                .filter(|d| matches!(d.kind, DependencyKind::Normal | DependencyKind::Build))
                .map(|d| (d.name.clone(), d.optional))
                .collect();
            (p.name.to_string(), deps)
        })
        .collect()
}

#[test]
fn library_crates_follow_the_layer_table() {
    let packages = workspace_dependencies();
    let wrong = violations(&packages);
    assert!(
        wrong.is_empty(),
        "layering violations:\n{}",
        wrong.join("\n")
    );
}

/// The check itself can fail: each forbidden kind of edge, added to the
/// real graph, is reported.
#[test]
fn a_forbidden_edge_is_reported() {
    let forbidden = [
        ("agent-host-engine", "clap", false),
        ("agent-host-store", "agent-host-engine", false),
        ("agent-host-runtime", "agent-host", false),
        ("agent-host-provider", "indicatif", false),
        ("agent-host-engine", "clap", true),
    ];
    for (from, to, optional) in forbidden {
        let mut packages = workspace_dependencies();
        packages
            .get_mut(from)
            .expect("the crate exists")
            .push((to.to_owned(), optional));
        let wrong = violations(&packages);
        assert_eq!(wrong.len(), 1, "{from} -> {to}: {wrong:?}");
        assert!(
            wrong[0].contains(from) && wrong[0].contains(to),
            "{wrong:?}"
        );
    }
}

/// No library crate reaches a terminal crate through any chain of
/// dependencies (normal or build, features as the workspace resolves them),
/// but for the configuration crate's optional clap derives.
#[test]
fn no_library_reaches_a_terminal_crate() {
    let metadata = MetadataCommand::new()
        .manifest_path(concat!(env!("CARGO_MANIFEST_DIR"), "/../../Cargo.toml"))
        .exec()
        .expect("cargo metadata runs");
    let resolve = metadata.resolve.as_ref().expect("a resolved graph");
    let name_of = |id: &cargo_metadata::PackageId| metadata[id].name.to_string();
    let nodes: BTreeMap<_, _> = resolve.nodes.iter().map(|n| (n.id.clone(), n)).collect();
    let mut wrong = Vec::new();
    for (library, _) in ALLOWED {
        let Some(start) = metadata
            .workspace_packages()
            .into_iter()
            .find(|p| p.name.as_str() == library)
        else {
            continue;
        };
        let mut stack = vec![start.id.clone()];
        let mut seen = std::collections::HashSet::new();
        while let Some(id) = stack.pop() {
            if !seen.insert(id.clone()) {
                continue;
            }
            let from = name_of(&id);
            for dep in &nodes[&id].deps {
                let runtime = dep
                    .dep_kinds
                    .iter()
                    .any(|k| matches!(k.kind, DependencyKind::Normal | DependencyKind::Build));
                if !runtime {
                    continue;
                }
                let to = name_of(&dep.pkg);
                if from == "agent-host-config" && to == "clap" {
                    continue; // behind its `clap` feature, for the command line
                }
                if FRONT_END_ONLY.contains(&to.as_str()) {
                    wrong.push(format!("{library} reaches {to} (through {from})"));
                }
                stack.push(dep.pkg.clone());
            }
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}
