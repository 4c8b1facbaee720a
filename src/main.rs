//! The `coursed` binary: parse the command line, set up logging, run the library.

use std::io::Write as _;
use std::process::ExitCode;
use std::sync::Arc;

use clap::Parser;
use coursed::cli::{Cli, Command, ServeArgs, TokenCommand, WebhookCommand};
use coursed::dataset;

fn main() -> ExitCode {
    let started = std::time::Instant::now();
    let command = Cli::parse().command;
    if !matches!(command, Command::Serve(_)) {
        // What a command must tell beyond its result (a backup taken before a migration) is
        // logged at warn; no times, the command's run is short.
        let config = simplelog::ConfigBuilder::new()
            .set_time_level(log::LevelFilter::Off)
            .set_target_level(log::LevelFilter::Off)
            .set_thread_level(log::LevelFilter::Off)
            .add_filter_allow_str("coursed")
            .build();
        let _ = simplelog::WriteLogger::init(log::LevelFilter::Warn, config, std::io::stderr());
    }
    let filled = match command {
        Command::Serve(args) => return serve(args),
        Command::Load(a) => dataset::load(&a.database, &a.file, a.ids_dir.as_deref())
            .map(|c| format!("{}: {c}", coursed::store::display_name(&a.database))),
        Command::Generate(a) => {
            let shape = dataset::Shape {
                modules: a.modules,
                subjects_per_module: a.subjects_per_module,
                chapters_per_subject: a.chapters_per_subject,
                seed: a.seed,
            };
            dataset::generate(&a.database, shape, a.ids_dir.as_deref())
                .map(|c| format!("{}: {c}", coursed::store::display_name(&a.database)))
        }
        Command::Copy(a) => dataset::copy(&a.from, &a.to, a.replace).map(|c| {
            let (from, to) = (coursed::store::display_name(&a.from), coursed::store::display_name(&a.to));
            format!("copied {c} from {from} to {to}")
        }),
        Command::Backup(a) => coursed::backup::backup(&a.database, &a.output, a.force).map(|c| {
            let from = coursed::store::display_name(&a.database);
            format!("backed up {c} from {from} to {}", a.output.display())
        }),
        Command::Export(a) => {
            use coursed::bundle::Contents;
            let contents = match (a.since, a.history) {
                (Some(since), _) => Contents::Delta { since },
                (None, true) => Contents::WithHistory,
                (None, false) => Contents::Catalogue,
            };
            let exported = coursed::bundle::export(&a.database, &a.output, a.force, contents);
            let from = coursed::store::display_name(&a.database);
            return match exported {
                Ok(c) => {
                    // On stdout the bundle is the output: the summary goes to stderr then.
                    let to = if a.output == "-" { "stdout" } else { &a.output };
                    let summary =
                        format!("exported {c} from {from} to {to} in {:.1} s", started.elapsed().as_secs_f64());
                    if a.output == "-" {
                        eprintln!("{summary}");
                    } else {
                        println!("{summary}");
                    }
                    ExitCode::SUCCESS
                }
                Err(e) => fail(&e),
            };
        }
        Command::Token(t) => return token(t),
        Command::Webhook(w) => return webhook(w),
        Command::Follow(a) => match (a.forget, a.upstream, a.token) {
            (true, _, _) => coursed::follow::forget_command(&a.database),
            (false, Some(upstream), Some(token)) => coursed::follow::catch_up_once(&a.database, &upstream, &token),
            _ => Err("--upstream and --token are both needed".into()),
        },
        Command::History(coursed::cli::HistoryCommand::Prune(a)) => {
            coursed::history::prune_command(&a.database, &a.before)
        }
        Command::Import(a) => {
            let opts = coursed::bundle::Options {
                merge: a.merge,
                dry_run: a.dry_run,
                no_history: a.no_history,
                follow: a.follow,
            };
            coursed::bundle::import(&a.database, &a.file, opts).map(|c| {
                let into = coursed::store::display_name(&a.database);
                if a.dry_run {
                    format!("dry run, nothing written to {into}: would have {c}")
                } else {
                    format!("imported into {into}: {c}")
                }
            })
        }
    };
    match filled {
        Ok(summary) => {
            println!("{summary} in {:.1} s", started.elapsed().as_secs_f64());
            ExitCode::SUCCESS
        }
        Err(e) => fail(&e),
    }
}

fn serve(args: ServeArgs) -> ExitCode {
    // coursed's own records only: the HTTP stack's debug output is noise for every request.
    let config = simplelog::ConfigBuilder::new().set_time_format_rfc3339().add_filter_allow_str("coursed").build();
    let _ = simplelog::WriteLogger::init(args.log_level, config, std::io::stderr());
    let runtime = match tokio::runtime::Runtime::new() {
        Ok(r) => r,
        Err(e) => return fail(&format!("cannot start the runtime: {e}")),
    };
    let result = runtime.block_on(async move {
        let (app, new_token) = coursed::open(&args).await?;
        if let coursed::cli::Keep::For(keep) = args.history_keep {
            coursed::history::keep(app.db.clone(), keep);
        }
        if let Some(dir) = &args.backup_dir {
            let schedule =
                coursed::backup::Schedule { dir: dir.clone(), every: args.backup_every, keep: args.backup_keep };
            let database = if args.mock { ":memory:".to_owned() } else { args.database.clone() };
            schedule.start(database)?;
        }
        let listener = tokio::net::TcpListener::bind((args.host.as_str(), args.port))
            .await
            .map_err(|e| format!("cannot listen on {}:{}: {e}", args.host, args.port))?;
        let addr = listener.local_addr().map_err(|e| e.to_string())?;
        let metrics = match &args.metrics_listen {
            Some(at) => {
                let listener = tokio::net::TcpListener::bind(at.as_str())
                    .await
                    .map_err(|e| format!("cannot listen for --metrics-listen on {at}: {e}"))?;
                let bound = listener.local_addr().map_err(|e| e.to_string())?;
                // Before the API's first request, so that every request is counted.
                coursed::metrics::enable();
                Some((listener, bound))
            }
            None => None,
        };
        let mut out = std::io::stdout().lock();
        use coursed::tokens::first::{first_request, Accepted};
        let accepted = match &new_token {
            Some(t) if t.created => {
                let _ = writeln!(out, "no token configured: generated one ({}):\n{}", t.kept, t.tokens.join("\n"));
                Accepted::Generated(&t.tokens[0])
            }
            Some(t) => Accepted::Kept(&t.kept),
            None => Accepted::Configured { file: args.tokens_file.as_deref() },
        };
        // Before the readiness line, which scripts take for the last: a request that works as
        // printed, and no token unless this start made it (it was printed just above).
        for line in first_request(app.scheme(), addr, &accepted) {
            let _ = writeln!(out, "{line}");
        }
        // SIGTERM and SIGINT are watched from before the readiness line: one sent as soon as it
        // is printed stops the server gracefully, not by the signal's default action.
        let stop = shutdown_signal();
        // Likewise SIGHUP, which reads a renewed certificate again.
        let reloads = app.tls.clone().map(|tls| tokio::spawn(tls.watch()));
        if let Some((_, bound)) = &metrics {
            let _ = writeln!(out, "metrics on http://{bound}/metrics");
        }
        // The readiness line: clients and scripts wait for it (and read the port from it).
        let _ = writeln!(out, "listening on {}://{addr}/v1", app.scheme());
        // Webhooks are delivered by every server; links in what they send are made from
        // --public-url, else from the address listened on.
        if app.public_url.is_none() && addr.ip().is_unspecified() {
            log::warn!(
                "listening on {addr} without --public-url: webhooks' documents link to http://{addr}, which \
                 receivers cannot reach; set --public-url"
            );
        }
        // Stopped when dropped, after the server.
        let _follower = match (&args.follow, &args.follow_token) {
            (Some(url), Some(token)) => {
                log::info!("following {url}: writes to the catalogue here are refused");
                Some(coursed::follow::spawn(app.db.clone(), url, token, app.follow.clone())?)
            }
            _ => None,
        };
        let base = app.public_url.clone().or_else(|| coursed::render::Base::new(app.scheme(), &addr.to_string()));
        // Stopped when dropped, after the server.
        let _deliveries = match base {
            Some(base) => Some(coursed::webhooks::deliver::spawn(app.db.clone(), base, Default::default())?),
            None => None,
        };
        let app = Arc::new(app);
        let metrics = metrics.map(|(listener, _)| tokio::spawn(coursed::metrics::serve(listener, app.clone())));
        let _ = out.flush();
        drop(out);
        coursed::serve(listener, app, stop).await;
        if let Some(metrics) = metrics {
            metrics.abort();
        }
        if let Some(reloads) = reloads {
            reloads.abort();
        }
        Ok::<(), String>(())
    });
    // Dropping the runtime drops the last handle on the database: the writer finishes its
    // queue and every connection is closed (checkpointing the WAL) before the process exits.
    drop(runtime);
    match result {
        Ok(()) => {
            log::info!("stopped");
            ExitCode::SUCCESS
        }
        Err(e) => fail(&e),
    }
}

/// `coursed token ...`: the token alone on stdout for `create` (for scripts), what was done on
/// stderr; the table for `list`.
fn token(command: TokenCommand) -> ExitCode {
    use coursed::tokens::command;
    let done = match command {
        TokenCommand::Create(a) => {
            command::create(&a.database, &a.name, a.scope, a.expires, a.create_database).map(|c| {
                println!("{}", c.token);
                let expires = c
                    .listed
                    .expires_at
                    .map_or("never expires".to_owned(), |at| format!("expires {}", coursed::time::format_ms(at)));
                eprintln!(
                    "created token {:?} (scope {}, {expires}) in {}; it is shown only this once",
                    a.name,
                    a.scope.as_str(),
                    coursed::store::display_name(&a.database)
                );
            })
        }
        TokenCommand::List(a) => command::list(&a.database).map(|tokens| {
            if tokens.is_empty() {
                eprintln!(
                    "no tokens in {} (coursed token create makes one)",
                    coursed::store::display_name(&a.database)
                );
            } else {
                print!("{}", command::table(&tokens, coursed::time::now_ms()));
            }
        }),
        TokenCommand::Revoke(a) => command::revoke(&a.database, &a.name).map(|()| {
            eprintln!("revoked token {:?}: servers refuse it from their next request on", a.name);
        }),
    };
    match done {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => fail(&e),
    }
}

/// `coursed webhook ...`: what was done on stderr; the id and the secret of a new webhook, or
/// the table of `list`, on stdout.
fn webhook(command: WebhookCommand) -> ExitCode {
    use coursed::webhooks::{command, deliver, Filter};
    let done = match command {
        WebhookCommand::Add(a) => {
            Filter::parse(&a.types, &a.actions).and_then(|filter| command::add(&a.database, &a.url, &filter)).map(|w| {
                println!("{}\n{}", w.id, w.secret);
                eprintln!(
                    "added webhook {} for {}: the changes from cursor {} on are POSTed to it, signed with the \
                     secret above (shown only this once)",
                    w.id, w.url, w.cursor
                );
            })
        }
        WebhookCommand::List(a) => command::list(&a.database).map(|w| print!("{}", command::table(&w))),
        WebhookCommand::Remove(a) => command::remove(&a.database, &a.id).map(|()| {
            eprintln!("removed webhook {}: no server delivers it any more", a.id);
        }),
        WebhookCommand::Resume(a) => command::resume(&a.database, &a.id).map(|()| {
            eprintln!("resumed webhook {}: its deliveries start again where they stopped", a.id);
        }),
        WebhookCommand::Test(a) => {
            command::test(&a.database, &a.id, deliver::Settings::default().timeout).map(|said| println!("{said}"))
        }
    };
    match done {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => fail(&e),
    }
}

fn fail(message: &str) -> ExitCode {
    eprintln!("coursed: {message}");
    ExitCode::FAILURE
}

/// Completes on SIGINT or SIGTERM.
/// Completes at the first SIGTERM or SIGINT received from the moment it is called (the
/// handlers are installed then, not when the future is first polled).
fn shutdown_signal() -> impl std::future::Future<Output = ()> {
    use tokio::signal::unix::{signal, SignalKind};
    let (term, int) = (signal(SignalKind::terminate()), signal(SignalKind::interrupt()));
    async move {
        match (term, int) {
            (Ok(mut term), Ok(mut int)) => {
                tokio::select! {
                    _ = term.recv() => {}
                    _ = int.recv() => {}
                }
            }
            (Ok(mut only), Err(e)) | (Err(e), Ok(mut only)) => {
                log::warn!("cannot watch one of SIGTERM and SIGINT ({e}); the other stops coursed");
                only.recv().await;
            }
            (Err(e), Err(_)) => {
                log::warn!("cannot watch SIGTERM nor SIGINT ({e}); coursed stops only when killed");
                std::future::pending::<()>().await;
            }
        }
    }
}
