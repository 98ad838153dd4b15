//! People put options anywhere: `inspect sql DIR --as-of 2026-05-01 "SELECT …"`. This walks
//! every command of the whole tree and places each of its options before, between and after its
//! positional arguments, and checks that each placement parses to the same positionals.

use clap::error::{ContextKind, ContextValue, ErrorKind};
use clap::{Arg, ArgAction, Command};

/// Values tried, in order, for an option or positional whose value parser has no list of
/// possible values: the first that the parser takes when the option comes last is used. A new
/// kind of value fails the test until a sample of it is added here.
const SAMPLES: &[&str] = &[
    "v",
    "1",
    "10s",
    "a=b",
    "a:b=c",
    "2026-05-01",
    "127.0.0.1:7443",
    "/v",
    "65532:65532",
];

/// A command to check: the subcommand names below `factbuoy`, and the command itself.
fn leaves(command: &Command, path: Vec<String>, out: &mut Vec<(Vec<String>, Command)>) {
    if command.get_arguments().any(Arg::is_positional) || !command.has_subcommands() {
        out.push((path.clone(), command.clone()));
    }
    for sub in command.get_subcommands() {
        let mut below = path.clone();
        below.push(sub.get_name().to_owned());
        leaves(sub, below, out);
    }
}

/// The values to give `arg`: its first possible value, or the first sample its parser takes.
fn candidates(arg: &Arg) -> Vec<String> {
    match arg.get_possible_values().first() {
        Some(value) => vec![value.get_name().to_owned()],
        None => SAMPLES.iter().map(|s| s.to_string()).collect(),
    }
}

fn takes_value(arg: &Arg) -> bool {
    !matches!(
        arg.get_action(),
        ArgAction::SetTrue
            | ArgAction::SetFalse
            | ArgAction::Count
            | ArgAction::Help
            | ArgAction::HelpShort
            | ArgAction::HelpLong
            | ArgAction::Version
    )
}

/// How many values a positional is given: the fewest it takes, at least one.
fn arity(arg: &Arg) -> usize {
    arg.get_num_args().map_or(1, |n| n.min_values().max(1))
}

/// The option as a person types it: `--name VALUE` (or `-n VALUE` when it has no long name).
fn spelled(arg: &Arg, value: Option<&str>) -> Vec<String> {
    let flag = match arg.get_long() {
        Some(long) => format!("--{long}"),
        None => format!("-{}", arg.get_short().expect("an option has a name")),
    };
    std::iter::once(flag)
        .chain(value.map(str::to_owned))
        .collect()
}

/// The positional values `matches` holds for the command at `path`.
fn positionals_parsed(
    matches: &clap::ArgMatches,
    path: &[String],
    positionals: &[&Arg],
) -> Vec<Vec<String>> {
    let mut matches = matches;
    for name in path {
        matches = matches
            .subcommand_matches(name)
            .expect("the subcommand was given");
    }
    positionals
        .iter()
        .map(|arg| {
            matches
                .get_raw(arg.get_id().as_str())
                .map(|values| values.map(|v| v.to_string_lossy().into_owned()).collect())
                .unwrap_or_default()
        })
        .collect()
}

/// Whether `error` is `arg`'s parser refusing its value.
fn rejects_value_of(error: &clap::Error, arg: &Arg) -> bool {
    let about_arg = match error.get(ContextKind::InvalidArg) {
        Some(ContextValue::String(named)) => {
            arg.get_long()
                .is_some_and(|long| named.starts_with(&format!("--{long}")))
                || arg
                    .get_short()
                    .is_some_and(|short| named.starts_with(&format!("-{short}")))
        }
        _ => false,
    };
    about_arg
        && matches!(
            error.kind(),
            ErrorKind::InvalidValue | ErrorKind::ValueValidation
        )
}

#[test]
fn every_option_parses_before_between_and_after_every_commands_positionals() {
    let mut root = factbuoy::command();
    root.build();
    let mut commands = Vec::new();
    leaves(&root, Vec::new(), &mut commands);
    let parse = |args: &[String]| {
        factbuoy::command().try_get_matches_from(
            std::iter::once("factbuoy".to_owned()).chain(args.iter().cloned()),
        )
    };
    let mut failures = Vec::new();
    let mut placements = 0;
    for (path, command) in &commands {
        let positionals: Vec<&Arg> = command.get_positionals().collect();
        if positionals.is_empty() {
            continue;
        }
        // Each positional's values: the first candidate that parses with the others.
        let mut values: Vec<Vec<String>> = positionals
            .iter()
            .map(|arg| vec![candidates(arg)[0].clone(); arity(arg)])
            .collect();
        let options: Vec<&Arg> = command
            .get_arguments()
            .filter(|a| !a.is_positional() && !a.is_hide_set())
            .filter(|a| {
                !matches!(
                    a.get_action(),
                    ArgAction::Help
                        | ArgAction::HelpShort
                        | ArgAction::HelpLong
                        | ArgAction::Version
                )
            })
            .collect();
        let mut required: Vec<&Arg> = options
            .iter()
            .copied()
            .filter(|a| a.is_required_set())
            .collect();
        // Options required through another's absence (`--token` unless `--token-file`): those
        // the parser names as missing.
        loop {
            let mut args = path.clone();
            args.extend(values.iter().flatten().cloned());
            for arg in &required {
                let value = takes_value(arg).then(|| candidates(arg).swap_remove(0));
                args.extend(spelled(arg, value.as_deref()));
            }
            let missing = match parse(&args) {
                Err(e) if e.kind() == ErrorKind::MissingRequiredArgument => {
                    match e.get(ContextKind::InvalidArg) {
                        Some(ContextValue::Strings(names)) => names.clone(),
                        _ => break,
                    }
                }
                _ => break,
            };
            let before = required.len();
            for name in missing {
                if let Some(arg) = options.iter().find(|a| {
                    a.get_long()
                        .is_some_and(|long| name.starts_with(&format!("--{long} ")))
                }) && !required.iter().any(|r| r.get_id() == arg.get_id())
                {
                    required.push(arg);
                }
            }
            if required.len() == before {
                break;
            }
        }
        let mut option_values = std::collections::HashMap::new();
        let assemble = |values: &[Vec<String>],
                        option_values: &std::collections::HashMap<&str, String>,
                        moved: Option<(&Arg, usize)>| {
            let mut args = path.clone();
            let flat: Vec<&String> = values.iter().flatten().collect();
            for (i, value) in flat.iter().enumerate() {
                if let Some((arg, at)) = moved
                    && at == i
                {
                    args.extend(spelled(
                        arg,
                        option_values.get(arg.get_id().as_str()).map(String::as_str),
                    ));
                }
                args.push((*value).clone());
            }
            if let Some((arg, at)) = moved
                && at == flat.len()
            {
                args.extend(spelled(
                    arg,
                    option_values.get(arg.get_id().as_str()).map(String::as_str),
                ));
            }
            for arg in &required {
                if moved.is_none_or(|(m, _)| m.get_id() != arg.get_id()) {
                    args.extend(spelled(
                        arg,
                        option_values.get(arg.get_id().as_str()).map(String::as_str),
                    ));
                }
            }
            args
        };
        // Values for the options, each tried last: the first candidate its parser takes
        // (another option's value, or a conflict with another, may still fail the parse).
        for arg in &options {
            if takes_value(arg) {
                option_values.insert(arg.get_id().as_str(), candidates(arg)[0].clone());
            }
        }
        for arg in options.iter().filter(|a| takes_value(a)) {
            let found = candidates(arg).into_iter().find(|candidate| {
                let mut trial = option_values.clone();
                trial.insert(arg.get_id().as_str(), candidate.clone());
                let at = values.iter().flatten().count();
                match parse(&assemble(&values, &trial, Some((arg, at)))) {
                    Ok(_) => true,
                    Err(e) => !rejects_value_of(&e, arg),
                }
            });
            match found {
                Some(value) => option_values.insert(arg.get_id().as_str(), value),
                None => option_values.remove(arg.get_id().as_str()),
            };
        }
        // The positionals' own values, once the required options have theirs.
        for i in 0..positionals.len() {
            for candidate in candidates(positionals[i]) {
                let mut trial = values.clone();
                trial[i] = vec![candidate; arity(positionals[i])];
                if parse(&assemble(&trial, &option_values, None)).is_ok() {
                    values = trial;
                    break;
                }
            }
        }
        let baseline = assemble(&values, &option_values, None);
        if let Err(e) = parse(&baseline) {
            failures.push(format!("{baseline:?} does not parse: {e}"));
            continue;
        }
        let gaps = values.iter().flatten().count() + 1;
        for arg in &options {
            if takes_value(arg) && !option_values.contains_key(arg.get_id().as_str()) {
                failures.push(format!(
                    "{}: no sample value parses for {:?}: add one to SAMPLES",
                    path.join(" "),
                    arg.get_id()
                ));
                continue;
            }
            let last = assemble(&values, &option_values, Some((arg, gaps - 1)));
            // An option that conflicts with or needs another is left out here: its position
            // is not what fails.
            if parse(&last).is_err() {
                continue;
            }
            for at in 0..gaps {
                let args = assemble(&values, &option_values, Some((arg, at)));
                placements += 1;
                match parse(&args) {
                    Ok(matches) => {
                        let parsed = positionals_parsed(&matches, path, &positionals);
                        if parsed != values {
                            failures.push(format!(
                                "{args:?} read the positionals as {parsed:?}, not {values:?}"
                            ));
                        }
                    }
                    Err(e) => failures.push(format!("{args:?}: {}", e.kind())),
                }
            }
        }
    }
    assert!(placements > 100, "only {placements} placements were tried");
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
