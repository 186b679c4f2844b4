//! From `ServeArgs` to `Config`: the layering of flags, environment and file,
//! the defaults, and every check of a setting against the others.

use super::*;

impl ServeArgs {
    /// Layer `self` (command line and environment) over the config file, if any.
    pub fn with_file(self) -> Result<ServeArgs, ConfigError> {
        let Some(path) = self.config.clone() else {
            return Ok(self);
        };
        let file = read_file(&path)?;
        Ok(self.over(file))
    }

    /// Field by field, `self` wins where it has a value.
    pub(super) fn over(self, base: ServeArgs) -> ServeArgs {
        macro_rules! layer {
            ($($field:ident),* $(,)?) => {
                ServeArgs { $($field: self.$field.or(base.$field),)* }
            };
        }
        layer!(
            config,
            listen,
            advertise,
            listener_security_protocol_map,
            ssl_keystore_location,
            ssl_truststore_location,
            ssl_client_auth,
            ssl_principal_mapping_rules,
            sasl_enabled_mechanisms,
            authorizer,
            super_users,
            allow_everyone_if_no_acl_found,
            sasl_scram_legacy_nonce,
            connections_max_reauth_ms,
            add_scram,
            sasl_oauthbearer_jwks_endpoint_url,
            sasl_oauthbearer_jwks_endpoint_refresh_ms,
            sasl_oauthbearer_expected_audience,
            sasl_oauthbearer_expected_issuer,
            sasl_oauthbearer_sub_claim_name,
            sasl_oauthbearer_clock_skew_seconds,
            sasl_oauthbearer_unsecured,
            inter_broker_sasl_mechanism,
            inter_broker_sasl_username,
            inter_broker_sasl_password,
            controller_listener_security_protocol,
            data_dir,
            node_id,
            rack,
            auto_create_topics,
            num_partitions,
            segment_bytes,
            segment_ms,
            retention_ms,
            retention_bytes,
            retention_check_interval_ms,
            max_message_bytes,
            flush_messages,
            flush_ms,
            fsync_before_ack,
            request_max_bytes,
            queued_max_request_bytes,
            metrics_listen,
            log_level,
            log_format,
            profile,
            group_initial_rebalance_delay_ms,
            offsets_retention_minutes,
            offsets_retention_check_interval_ms,
            transaction_max_timeout_ms,
            transaction_abort_check_interval_ms,
            transactional_id_expiration_ms,
            producer_id_block_size,
            controller_voters,
            controller_listen,
            default_replication_factor,
            inter_broker_listener,
            replica_lag_time_max_ms,
            auto_leader_rebalance_enable,
            leader_imbalance_check_interval_seconds,
            replica_selector,
            offsets_topic_replication_factor,
            transaction_state_log_replication_factor,
            transaction_state_log_min_isr,
            log_cleaner_enable,
            log_cleaner_threads,
            log_cleaner_dedupe_buffer_size,
            log_cleaner_io_max_bytes_per_second,
            log_cleaner_backoff_ms,
            broker_session_timeout_ms,
            broker_heartbeat_interval_ms,
            controller_election_timeout_ms,
        )
    }

    /// Apply defaults and check every value. The checks run in a fixed order,
    /// one family at a time, and the first that fails is the one reported.
    pub fn resolve(self) -> Result<Config, ConfigError> {
        let listeners = self.resolve_listeners()?;
        let ssl = self.resolve_ssl(&listeners)?;
        let sasl = self.resolve_sasl()?;
        let authorizer = Arc::new(self.resolve_authorizer()?);
        let node_id = self.resolve_node_id()?;
        let num_partitions = self.resolve_num_partitions()?;
        let log_defaults = self.resolve_log_defaults()?;
        let flush = self.resolve_flush()?;
        let (request_max_bytes, queued_max_request_bytes) = self.resolve_request_limits()?;
        let metrics_listen = self.resolve_metrics_listen()?;
        let profile = self.profile.unwrap_or_default();
        let groups = self.resolve_groups(profile)?;
        let transactions = self.resolve_transactions(profile)?;
        let quorum = self.resolve_quorum(node_id)?;
        let cleaner = self.resolve_cleaner()?;
        let internal_topics = self.resolve_internal_topics(profile, quorum.is_some())?;
        let default_replication_factor = self
            .default_replication_factor
            .unwrap_or(DEFAULT_REPLICATION_FACTOR_DEFAULT);
        if default_replication_factor < 1 {
            return Err(invalid(format!(
                "--default-replication-factor must be at least 1, not {default_replication_factor}"
            )));
        }
        let inter_broker_listener = match &self.inter_broker_listener {
            Some(name) if listeners.iter().any(|l| &l.name == name) => name.clone(),
            Some(name) => {
                return Err(invalid(format!(
                    "--inter-broker-listener {name} names no listener of --listen"
                )))
            }
            None => listeners
                .first()
                .map(|l| l.name.clone())
                .unwrap_or_default(),
        };
        let inter_broker = listeners.iter().find(|l| l.name == inter_broker_listener);
        if let (Some(listener), Some(_)) = (inter_broker, &quorum) {
            if listener.protocol.uses_tls() && self.ssl_truststore_location.is_none() {
                return Err(invalid(format!(
                    "the inter-broker listener {} is {}: give --ssl-truststore-location, the CA the other brokers' certificates chain to",
                    listener.name,
                    listener.protocol.name()
                )));
            }
        }
        // A single node has no other broker to log in to.
        let inter_broker_sasl =
            self.resolve_inter_broker_sasl(inter_broker.filter(|_| quorum.is_some()), &sasl)?;
        let replica_lag_time_max_ms = self
            .replica_lag_time_max_ms
            .unwrap_or(REPLICA_LAG_TIME_MAX_MS_DEFAULT);
        if replica_lag_time_max_ms == 0 {
            return Err(invalid("--replica-lag-time-max-ms must be at least 1"));
        }
        Ok(Config {
            listeners,
            ssl,
            sasl,
            authorizer,
            data_dir: self
                .data_dir
                .unwrap_or_else(|| PathBuf::from(DEFAULT_DATA_DIR)),
            node_id,
            rack: self.rack,
            auto_create_topics: self.auto_create_topics.unwrap_or(true),
            num_partitions,
            log_defaults,
            retention_check_interval_ms: self
                .retention_check_interval_ms
                .unwrap_or(RETENTION_CHECK_INTERVAL_MS_DEFAULT),
            flush,
            request_max_bytes,
            queued_max_request_bytes,
            metrics_listen,
            log_level: self
                .log_level
                .unwrap_or_else(|| LOG_LEVEL_DEFAULT.to_string()),
            log_format: self.log_format.unwrap_or_default(),
            profile,
            groups,
            transactions,
            default_replication_factor,
            inter_broker_listener,
            inter_broker_sasl,
            replica_lag_time_max_ms,
            auto_leader_rebalance_enable: self.auto_leader_rebalance_enable.unwrap_or(true),
            replica_selector: self.replica_selector.unwrap_or_default(),
            leader_imbalance_check_interval_seconds: self
                .leader_imbalance_check_interval_seconds
                .unwrap_or(LEADER_IMBALANCE_CHECK_INTERVAL_SECONDS_DEFAULT)
                .max(1),
            cleaner,
            internal_topics,
            quorum,
        })
    }

    /// The authorizer and its settings.
    fn resolve_authorizer(&self) -> Result<Authorizer, ConfigError> {
        let kind = self.authorizer.unwrap_or_default();
        let super_users: BTreeSet<String> = self
            .super_users
            .iter()
            .flat_map(|users| users.split(';'))
            .map(str::trim)
            .filter(|user| !user.is_empty())
            .map(str::to_string)
            .collect();
        for user in &super_users {
            if !user
                .split_once(':')
                .is_some_and(|(kind, name)| !kind.is_empty() && !name.is_empty())
            {
                return Err(invalid(format!(
                    "--super-users: {user} is not a principal (Type:name, e.g. User:admin)"
                )));
            }
        }
        let allow_everyone = self.allow_everyone_if_no_acl_found.unwrap_or(false);
        match kind {
            AuthorizerKind::None => {
                if !super_users.is_empty() || allow_everyone {
                    return Err(invalid(
                        "--super-users and --allow-everyone-if-no-acl-found need --authorizer standard",
                    ));
                }
                Ok(Authorizer::None)
            }
            AuthorizerKind::Standard => Ok(Authorizer::Standard {
                super_users,
                allow_everyone_if_no_acl_found: allow_everyone,
            }),
        }
    }

    /// The internal topics' replication settings.
    fn resolve_internal_topics(
        &self,
        profile: Profile,
        clustered: bool,
    ) -> Result<InternalTopicSettings, ConfigError> {
        let settings = InternalTopicSettings {
            offsets_replication_factor: self
                .offsets_topic_replication_factor
                .unwrap_or(INTERNAL_TOPIC_REPLICATION_FACTOR_DEFAULT),
            txn_replication_factor: self
                .transaction_state_log_replication_factor
                .unwrap_or(INTERNAL_TOPIC_REPLICATION_FACTOR_DEFAULT),
            txn_min_isr: self
                .transaction_state_log_min_isr
                .unwrap_or(TRANSACTION_STATE_LOG_MIN_ISR_DEFAULT),
            fit_to_live_brokers: !clustered || profile == Profile::Dev,
        };
        if settings.offsets_replication_factor < 1
            || settings.txn_replication_factor < 1
            || settings.txn_min_isr < 1
        {
            return Err(invalid(
                "internal topic replication factors and min ISR must be at least 1",
            ));
        }
        Ok(settings)
    }

    /// The `log.cleaner.*` settings.
    fn resolve_cleaner(&self) -> Result<CleanerSettings, ConfigError> {
        let threads = self
            .log_cleaner_threads
            .unwrap_or(LOG_CLEANER_THREADS_DEFAULT);
        if threads == 0 {
            return Err(invalid("--log-cleaner-threads must be at least 1"));
        }
        let io_max = self.log_cleaner_io_max_bytes_per_second;
        if io_max.is_some_and(|rate| rate.is_nan() || rate <= 0.0) {
            return Err(invalid(
                "--log-cleaner-io-max-bytes-per-second must be above 0",
            ));
        }
        Ok(CleanerSettings {
            enable: self.log_cleaner_enable.unwrap_or(true),
            threads,
            dedupe_buffer_bytes: self
                .log_cleaner_dedupe_buffer_size
                .unwrap_or(LOG_CLEANER_DEDUPE_BUFFER_BYTES_DEFAULT),
            io_max_bytes_per_second: io_max,
            backoff_ms: self
                .log_cleaner_backoff_ms
                .unwrap_or(LOG_CLEANER_BACKOFF_MS_DEFAULT)
                .max(1),
        })
    }

    /// `--controller-voters` and `--controller-listen`, checked against each
    /// other and this node's id.
    fn resolve_quorum(&self, node_id: i32) -> Result<Option<QuorumSettings>, ConfigError> {
        let Some(voters) = &self.controller_voters else {
            if self.controller_listen.is_some() {
                return Err(invalid(
                    "--controller-listen needs --controller-voters: name the voters of the cluster",
                ));
            }
            return Ok(None);
        };
        let voters = parse_voter_list(voters)?;
        let listen = self.controller_listen.as_deref().ok_or_else(|| {
            invalid("--controller-voters needs --controller-listen: where this node listens for the others")
        })?;
        let listen = parse_bind_address(listen)?;
        let (listen_host, listen_port) = split_host_port(&listen);
        let wildcard = matches!(listen_host, "0.0.0.0" | "[::]" | "");
        match voters.iter().find(|v| v.id == node_id) {
            Some(own) => {
                let (_, own_port) = split_host_port(&own.address);
                let matches = own.address == listen || (wildcard && own_port == listen_port);
                if !matches {
                    return Err(invalid(format!(
                        "node {node_id} is voter {own} but --controller-listen is {listen}: listen on the voter's own address (or on its port with host 0.0.0.0)"
                    )));
                }
            }
            None => {
                if let Some(other) = voters.iter().find(|v| v.address == listen) {
                    return Err(invalid(format!(
                        "--controller-listen {listen} is the address of voter {other}, but this node's id is {node_id}: use that voter's --node-id, or another address"
                    )));
                }
                if wildcard {
                    return Err(invalid(format!(
                        "node {node_id} is not a voter, so the voters connect to its --controller-listen: give an address they can reach, not {listen}"
                    )));
                }
            }
        }
        let positive = |value: Option<u64>, default: u64, flag: &str| match value {
            Some(0) => Err(invalid(format!("{flag} must be above 0"))),
            Some(v) => Ok(v),
            None => Ok(default),
        };
        let broker_session_timeout_ms = positive(
            self.broker_session_timeout_ms,
            BROKER_SESSION_TIMEOUT_MS_DEFAULT,
            "--broker-session-timeout-ms",
        )?;
        let broker_heartbeat_interval_ms = positive(
            self.broker_heartbeat_interval_ms,
            BROKER_HEARTBEAT_INTERVAL_MS_DEFAULT,
            "--broker-heartbeat-interval-ms",
        )?;
        if broker_heartbeat_interval_ms >= broker_session_timeout_ms {
            return Err(invalid(format!(
                "--broker-heartbeat-interval-ms ({broker_heartbeat_interval_ms}) must be below --broker-session-timeout-ms ({broker_session_timeout_ms})"
            )));
        }
        let election_timeout_ms = positive(
            self.controller_election_timeout_ms,
            CONTROLLER_ELECTION_TIMEOUT_MS_DEFAULT,
            "--controller-election-timeout-ms",
        )?;
        Ok(Some(QuorumSettings {
            listen,
            voters,
            broker_session_timeout_ms,
            broker_heartbeat_interval_ms,
            election_timeout_ms,
            tls: self.controller_tls()?,
        }))
    }

    /// Whether `--controller-listener-security-protocol` asks for mutual TLS.
    fn controller_tls(&self) -> Result<bool, ConfigError> {
        match self.controller_listener_security_protocol.as_deref() {
            None | Some("PLAINTEXT") => Ok(false),
            Some("SSL") => {
                if self.ssl_keystore_location.is_none() || self.ssl_truststore_location.is_none() {
                    return Err(invalid(
                        "--controller-listener-security-protocol SSL needs --ssl-keystore-location (this node's key and certificate) and --ssl-truststore-location (the CA the other nodes' certificates chain to)",
                    ));
                }
                Ok(true)
            }
            Some(other) => Err(invalid(format!(
                "--controller-listener-security-protocol is PLAINTEXT or SSL, not {other}"
            ))),
        }
    }

    /// The inter-broker SASL login, when the inter-broker listener is a SASL
    /// one (and then it must be complete).
    fn resolve_inter_broker_sasl(
        &self,
        listener: Option<&ListenerConfig>,
        sasl: &SaslConfig,
    ) -> Result<Option<InterBrokerSasl>, ConfigError> {
        let Some(listener) = listener.filter(|l| l.protocol.uses_sasl()) else {
            return Ok(None);
        };
        let name = self
            .inter_broker_sasl_mechanism
            .as_deref()
            .unwrap_or("SCRAM-SHA-512");
        let mechanism = Mechanism::from_name(name).ok_or_else(|| {
            invalid(format!(
                "--inter-broker-sasl-mechanism: '{name}' is not one of PLAIN, SCRAM-SHA-256, SCRAM-SHA-512"
            ))
        })?;
        if !sasl.settings.mechanisms.contains(&mechanism) {
            return Err(invalid(format!(
                "--inter-broker-sasl-mechanism {name} is not in --sasl-enabled-mechanisms"
            )));
        }
        match (&self.inter_broker_sasl_username, &self.inter_broker_sasl_password) {
            (Some(username), Some(password)) => Ok(Some(InterBrokerSasl {
                mechanism,
                username: username.clone(),
                password: password.clone(),
            })),
            _ => Err(invalid(format!(
                "the inter-broker listener {} is {}: give --inter-broker-sasl-username and --inter-broker-sasl-password (SLUICE_INTER_BROKER_SASL_PASSWORD), a user every node creates with --add-scram",
                listener.name,
                listener.protocol.name()
            ))),
        }
    }

    /// `--listen` (or the default listener) matched with `--advertise`, each
    /// with its security protocol.
    fn resolve_listeners(&self) -> Result<Vec<ListenerConfig>, ConfigError> {
        let default_listen = [DEFAULT_LISTEN.to_string()];
        let listen = self.listen.as_deref().unwrap_or(&default_listen);
        let mut listeners = parse_listeners(listen, self.advertise.as_deref().unwrap_or(&[]))?;
        for entry in self
            .listener_security_protocol_map
            .as_deref()
            .unwrap_or(&[])
        {
            let (name, protocol) = entry.split_once(':').ok_or_else(|| {
                invalid(format!(
                    "--listener-security-protocol-map entry '{entry}' is not NAME:PROTOCOL"
                ))
            })?;
            let protocol = SecurityProtocol::parse(protocol).ok_or_else(|| {
                invalid(format!(
                    "--listener-security-protocol-map: '{protocol}' is not PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL"
                ))
            })?;
            let listener = listeners
                .iter_mut()
                .find(|l| l.name.eq_ignore_ascii_case(name))
                .ok_or_else(|| {
                    invalid(format!(
                        "--listener-security-protocol-map names {name}, which is no listener of --listen"
                    ))
                })?;
            listener.protocol = protocol;
        }
        Ok(listeners)
    }

    /// The TLS settings, checked when a listener runs TLS; ignored otherwise.
    fn resolve_ssl(&self, listeners: &[ListenerConfig]) -> Result<Option<SslConfig>, ConfigError> {
        let needed_by = match listeners.iter().find(|l| l.protocol.uses_tls()) {
            Some(tls) => format!("listener {} is {}", tls.name, tls.protocol.name()),
            None if self.controller_listener_security_protocol.as_deref() == Some("SSL") => {
                "the controller listener is SSL".to_string()
            }
            None => return Ok(None),
        };
        let keystore = self.ssl_keystore_location.clone().ok_or_else(|| {
            invalid(format!(
                "{needed_by}: give --ssl-keystore-location, a PEM file with the broker's key and certificate chain"
            ))
        })?;
        let client_auth = self.ssl_client_auth.unwrap_or_default();
        if client_auth != SslClientAuth::None && self.ssl_truststore_location.is_none() {
            return Err(invalid(
                "--ssl-client-auth requested or required needs --ssl-truststore-location, the CA certificates client certificates chain to",
            ));
        }
        if let Some(rules) = &self.ssl_principal_mapping_rules {
            PrincipalMapper::parse(rules)
                .map_err(|e| invalid(format!("--ssl-principal-mapping-rules: {e}")))?;
        }
        Ok(Some(SslConfig {
            keystore,
            truststore: self.ssl_truststore_location.clone(),
            client_auth,
            principal_mapping_rules: self.ssl_principal_mapping_rules.clone(),
        }))
    }

    /// The SASL mechanisms, the session lifetime and the users to create.
    fn resolve_sasl(&self) -> Result<SaslConfig, ConfigError> {
        let mechanisms = match &self.sasl_enabled_mechanisms {
            None => Mechanism::ALL.to_vec(),
            Some(names) => {
                let mut mechanisms = Vec::new();
                for name in names.iter().map(|n| n.trim()).filter(|n| !n.is_empty()) {
                    let mechanism = Mechanism::from_name(name).ok_or_else(|| {
                        invalid(format!(
                            "--sasl-enabled-mechanisms: '{name}' is not one of PLAIN, SCRAM-SHA-256, SCRAM-SHA-512, OAUTHBEARER"
                        ))
                    })?;
                    if !mechanisms.contains(&mechanism) {
                        mechanisms.push(mechanism);
                    }
                }
                if mechanisms.is_empty() {
                    return Err(invalid("--sasl-enabled-mechanisms names no mechanism"));
                }
                mechanisms
            }
        };
        let (oauthbearer, jwks) = self.resolve_oauthbearer()?;
        let mut mechanisms = mechanisms;
        if oauthbearer.is_some()
            && self.sasl_enabled_mechanisms.is_none()
            && !mechanisms.contains(&Mechanism::OAuthBearer)
        {
            mechanisms.push(Mechanism::OAuthBearer);
        }
        if mechanisms.contains(&Mechanism::OAuthBearer) && oauthbearer.is_none() {
            return Err(invalid(
                "OAUTHBEARER needs --sasl-oauthbearer-jwks-endpoint-url (the keys tokens are signed with) or, for development, --sasl-oauthbearer-unsecured true",
            ));
        }
        let legacy_default = self.profile.unwrap_or_default() == Profile::Dev;
        let max_reauth = match self.connections_max_reauth_ms.unwrap_or(0) {
            0 => None,
            ms => Some(std::time::Duration::from_millis(ms)),
        };
        let add_scram = self
            .add_scram
            .iter()
            .flatten()
            .map(|entry| entry.trim())
            .filter(|entry| !entry.is_empty())
            .map(parse_scram_user)
            .collect::<Result<Vec<_>, _>>()?;
        Ok(SaslConfig {
            settings: Arc::new(SaslSettings {
                mechanisms,
                scram_legacy_nonce: self.sasl_scram_legacy_nonce.unwrap_or(legacy_default),
                max_reauth,
                oauthbearer,
            }),
            add_scram,
            jwks,
        })
    }

    /// OAUTHBEARER's settings and where its keys are read, when it is
    /// configured.
    fn resolve_oauthbearer(
        &self,
    ) -> Result<(Option<Arc<OAuthBearerSettings>>, Option<JwksSource>), ConfigError> {
        let unsecured = self.sasl_oauthbearer_unsecured.unwrap_or(false);
        let jwks = match self.sasl_oauthbearer_jwks_endpoint_url.as_deref() {
            None => None,
            Some(url) => {
                let location = if let Some(path) = url.strip_prefix("file://") {
                    JwksLocation::File(PathBuf::from(path))
                } else if url
                    .strip_prefix("https://")
                    .is_some_and(|rest| !rest.is_empty() && !rest.starts_with('/'))
                {
                    JwksLocation::Https {
                        url: url.to_string(),
                        truststore: self.ssl_truststore_location.clone(),
                    }
                } else {
                    return Err(invalid(format!(
                        "--sasl-oauthbearer-jwks-endpoint-url {url}: give a file:// or an https:// URL"
                    )));
                };
                let refresh_ms = match self.sasl_oauthbearer_jwks_endpoint_refresh_ms {
                    Some(0) => {
                        return Err(invalid(
                            "--sasl-oauthbearer-jwks-endpoint-refresh-ms must be above 0",
                        ))
                    }
                    Some(ms) => ms,
                    None => SASL_OAUTHBEARER_JWKS_REFRESH_MS_DEFAULT,
                };
                Some(JwksSource {
                    location,
                    refresh_ms,
                    cache: Arc::default(),
                })
            }
        };
        if unsecured && jwks.is_some() {
            return Err(invalid(
                "--sasl-oauthbearer-unsecured and --sasl-oauthbearer-jwks-endpoint-url exclude each other: tokens are either signed or not",
            ));
        }
        if !unsecured && jwks.is_none() {
            return Ok((None, None));
        }
        let settings = OAuthBearerSettings {
            unsecured,
            jwks: jwks
                .as_ref()
                .map_or_else(Arc::default, |source| Arc::clone(&source.cache)),
            expected_audience: self
                .sasl_oauthbearer_expected_audience
                .iter()
                .flatten()
                .map(|a| a.trim().to_string())
                .filter(|a| !a.is_empty())
                .collect(),
            expected_issuer: self.sasl_oauthbearer_expected_issuer.clone(),
            sub_claim: self
                .sasl_oauthbearer_sub_claim_name
                .clone()
                .unwrap_or_else(|| "sub".to_string()),
            clock_skew_seconds: self
                .sasl_oauthbearer_clock_skew_seconds
                .unwrap_or(SASL_OAUTHBEARER_CLOCK_SKEW_SECONDS_DEFAULT),
        };
        Ok((Some(Arc::new(settings)), jwks))
    }

    /// This broker's id. Kafka's `node.id` has no default; a lone broker is 1.
    fn resolve_node_id(&self) -> Result<i32, ConfigError> {
        let node_id = self.node_id.unwrap_or(NODE_ID_DEFAULT);
        if node_id < 0 {
            return Err(invalid("node id must be >= 0"));
        }
        Ok(node_id)
    }

    /// Partitions of an auto-created topic, within what a topic may have.
    fn resolve_num_partitions(&self) -> Result<i32, ConfigError> {
        let num_partitions = self.num_partitions.unwrap_or(NUM_PARTITIONS_DEFAULT);
        if !(1..=crate::limits::PARTITIONS_PER_TOPIC_MAX).contains(&num_partitions) {
            return Err(invalid("num partitions must be between 1 and 100000"));
        }
        Ok(num_partitions)
    }

    /// The `log.*` defaults topics inherit, within what the log can hold.
    fn resolve_log_defaults(&self) -> Result<LogDefaults, ConfigError> {
        let log_defaults = LogDefaults {
            segment_bytes: self.segment_bytes.unwrap_or(SEGMENT_BYTES_DEFAULT),
            segment_ms: self.segment_ms.unwrap_or(SEGMENT_MS_DEFAULT),
            retention_ms: self.retention_ms.unwrap_or(RETENTION_MS_DEFAULT),
            retention_bytes: self.retention_bytes.unwrap_or(RETENTION_BYTES_DEFAULT),
            max_message_bytes: self.max_message_bytes.unwrap_or(MESSAGE_BYTES_MAX_DEFAULT),
        };
        if log_defaults.segment_bytes < 14 || log_defaults.segment_bytes > i32::MAX as u64 {
            return Err(invalid("segment bytes must be between 14 and 2147483647"));
        }
        if log_defaults.segment_ms < 1 {
            return Err(invalid("segment ms must be >= 1"));
        }
        if log_defaults.retention_ms < -1 || log_defaults.retention_bytes < -1 {
            return Err(invalid("retention ms and bytes must be >= -1"));
        }
        Ok(log_defaults)
    }

    /// When partitions are forced to disk; unset counts and intervals never force.
    fn resolve_flush(&self) -> Result<FlushPolicy, ConfigError> {
        let flush = FlushPolicy {
            messages: self.flush_messages,
            interval_ms: self.flush_ms,
            before_ack: self.fsync_before_ack.unwrap_or(false),
        };
        if flush.messages.is_some_and(|m| m < 1) || flush.interval_ms.is_some_and(|m| m < 0) {
            return Err(invalid("flush messages must be >= 1 and flush ms >= 0"));
        }
        Ok(flush)
    }

    /// The largest frame and the budget of request bytes in flight, as
    /// `(request_max_bytes, queued_max_request_bytes)`.
    fn resolve_request_limits(&self) -> Result<(u32, u64), ConfigError> {
        let request_max_bytes = self.request_max_bytes.unwrap_or(REQUEST_SIZE_BYTES_DEFAULT);
        if !(1024..=REQUEST_SIZE_BYTES_MAX).contains(&request_max_bytes) {
            return Err(invalid(format!(
                "request max bytes must be between 1024 and {REQUEST_SIZE_BYTES_MAX}"
            )));
        }
        // A budget below the frame limit would leave the largest frames waiting
        // for ever (or, if clamped, exceed the budget it claims), so the two are
        // checked together and the user told which to change.
        let queued_max_request_bytes = self
            .queued_max_request_bytes
            .unwrap_or(QUEUED_REQUEST_BYTES_DEFAULT);
        if queued_max_request_bytes > QUEUED_REQUEST_BYTES_MAX {
            return Err(invalid(format!(
                "queued max request bytes must be at most {QUEUED_REQUEST_BYTES_MAX}"
            )));
        }
        if u64::from(request_max_bytes) > queued_max_request_bytes {
            return Err(invalid(format!(
                "request max bytes ({request_max_bytes}) is larger than queued max request \
                 bytes ({queued_max_request_bytes}), so a frame of the largest size could \
                 never be read: raise --queued-max-request-bytes to at least \
                 {request_max_bytes} or lower --request-max-bytes"
            )));
        }
        Ok((request_max_bytes, queued_max_request_bytes))
    }

    /// The metrics endpoint's bind address, if one is asked for.
    fn resolve_metrics_listen(&self) -> Result<Option<String>, ConfigError> {
        self.metrics_listen
            .as_deref()
            .map(parse_bind_address)
            .transpose()
    }

    /// The `group.*` and `offsets.*` settings, the rebalance delay by profile.
    fn resolve_groups(&self, profile: Profile) -> Result<GroupSettings, ConfigError> {
        let profile_delay_ms = match profile {
            Profile::Kafka => GROUP_INITIAL_REBALANCE_DELAY_MS_DEFAULT,
            Profile::Dev => GROUP_INITIAL_REBALANCE_DELAY_MS_DEV,
        };
        let groups = GroupSettings {
            initial_rebalance_delay_ms: self
                .group_initial_rebalance_delay_ms
                .unwrap_or(profile_delay_ms),
            min_session_timeout_ms: GROUP_MIN_SESSION_TIMEOUT_MS_DEFAULT,
            max_session_timeout_ms: GROUP_MAX_SESSION_TIMEOUT_MS_DEFAULT,
            offsets_retention_ms: self
                .offsets_retention_minutes
                .unwrap_or(OFFSETS_RETENTION_MINUTES_DEFAULT)
                .saturating_mul(MS_PER_MINUTE),
            offsets_retention_check_interval_ms: self
                .offsets_retention_check_interval_ms
                .unwrap_or(OFFSETS_RETENTION_CHECK_INTERVAL_MS_DEFAULT),
        };
        if groups.initial_rebalance_delay_ms < 0
            || groups.offsets_retention_ms < 1
            || groups.offsets_retention_check_interval_ms < 1
        {
            return Err(invalid(
                "group initial rebalance delay must be >= 0, offsets retention >= 1 minute \
                 and the offsets retention check interval >= 1 ms",
            ));
        }
        Ok(groups)
    }

    /// The `transaction.*` settings, the abort check interval by profile.
    fn resolve_transactions(&self, profile: Profile) -> Result<TxnSettings, ConfigError> {
        let profile_abort_check_interval_ms = match profile {
            Profile::Kafka => TRANSACTION_ABORT_CHECK_INTERVAL_MS_DEFAULT,
            Profile::Dev => TRANSACTION_ABORT_CHECK_INTERVAL_MS_DEV,
        };
        let transactions = TxnSettings {
            max_timeout_ms: self
                .transaction_max_timeout_ms
                .unwrap_or(TRANSACTION_MAX_TIMEOUT_MS_DEFAULT),
            abort_check_interval_ms: self
                .transaction_abort_check_interval_ms
                .unwrap_or(profile_abort_check_interval_ms),
            id_expiration_ms: self
                .transactional_id_expiration_ms
                .unwrap_or(TRANSACTIONAL_ID_EXPIRATION_MS_DEFAULT),
            producer_id_block_size: self
                .producer_id_block_size
                .unwrap_or(PRODUCER_ID_BLOCK_SIZE_DEFAULT),
        };
        if transactions.max_timeout_ms < 1
            || transactions.abort_check_interval_ms < 1
            || transactions.id_expiration_ms < 1
        {
            return Err(invalid(
                "transaction max timeout, abort check interval and id expiration must be >= 1",
            ));
        }
        if !(1..=PRODUCER_ID_BLOCK_COUNT_MAX).contains(&transactions.producer_id_block_size) {
            return Err(invalid(format!(
                "producer id block size must be between 1 and {PRODUCER_ID_BLOCK_COUNT_MAX}"
            )));
        }
        Ok(transactions)
    }
}

impl Config {
    /// A broker on an ephemeral loopback port with data in `data_dir`, with the
    /// dev profile (groups rebalance at once): what tests and embedded use start
    /// from.
    pub fn ephemeral(data_dir: &Path) -> Config {
        let args = ServeArgs {
            listen: Some(vec!["127.0.0.1:0".to_string()]),
            data_dir: Some(data_dir.to_path_buf()),
            profile: Some(Profile::Dev),
            ..ServeArgs::default()
        };
        match args.resolve() {
            Ok(config) => config,
            Err(error) => unreachable!("the ephemeral defaults are valid: {error}"),
        }
    }
}

/// Kafka's `--add-scram` entry: `MECHANISM=[name=N,password=P,iterations=I]`,
/// a value optionally in double quotes (a password with a comma).
fn parse_scram_user(entry: &str) -> Result<ScramUser, ConfigError> {
    let wrong = |why: &str| {
        invalid(format!(
            "--add-scram '{}': {why} (expected SCRAM-SHA-256=[name=alice,password=alice-secret])",
            entry.split("password").next().unwrap_or_default()
        ))
    };
    let (mechanism, body) = entry.split_once('=').ok_or_else(|| wrong("no '='"))?;
    let mechanism = ScramMechanism::from_name(mechanism.trim())
        .ok_or_else(|| wrong("the mechanism is not SCRAM-SHA-256 or SCRAM-SHA-512"))?;
    let body = body
        .trim()
        .strip_prefix('[')
        .and_then(|b| b.strip_suffix(']'))
        .ok_or_else(|| wrong("the fields are not in [...]"))?;
    let (mut name, mut password, mut iterations) = (None, None, None);
    let mut rest = body;
    while !rest.is_empty() {
        let (key, after) = rest
            .split_once('=')
            .ok_or_else(|| wrong("a field has no '='"))?;
        let (value, after) = match after.strip_prefix('"') {
            Some(quoted) => {
                let (value, after) = quoted
                    .split_once('"')
                    .ok_or_else(|| wrong("a quoted value has no closing quote"))?;
                (value, after.strip_prefix(',').unwrap_or(after))
            }
            None => after.split_once(',').unwrap_or((after, "")),
        };
        match key.trim() {
            "name" => name = Some(value.to_string()),
            "password" => password = Some(value.to_string()),
            "iterations" => {
                iterations = Some(
                    value
                        .trim()
                        .parse::<u32>()
                        .map_err(|_| wrong("iterations is not a number"))?,
                )
            }
            _ => return Err(wrong("an unknown field (name, password, iterations)")),
        }
        rest = after;
    }
    let iterations = iterations.unwrap_or(SCRAM_ITERATIONS_MIN);
    if !(SCRAM_ITERATIONS_MIN..=SCRAM_ITERATIONS_MAX).contains(&iterations) {
        return Err(wrong("iterations must be 4096 to 16384"));
    }
    let name = name
        .filter(|n| !n.is_empty())
        .ok_or_else(|| wrong("no name"))?;
    let password = password
        .filter(|p| !p.is_empty())
        .ok_or_else(|| wrong("no password"))?;
    Ok(ScramUser {
        mechanism,
        name,
        password,
        iterations,
    })
}

fn read_file(path: &Path) -> Result<ServeArgs, ConfigError> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| invalid(format!("cannot read config file {}: {e}", path.display())))?;
    toml::from_str(&text).map_err(|e| invalid(format!("config file {}: {e}", path.display())))
}

/// One `[NAME://]HOST:PORT` of `--listen` or `--advertise` (Kafka's `EndPoint`,
/// before its security protocol is resolved): the listener name upper-cased, the
/// host without the brackets of an IPv6 address.
struct Endpoint {
    listener_name: Option<String>,
    host: String,
    port: u16,
}

/// `[NAME://]HOST:PORT` into its endpoint.
fn parse_endpoint(text: &str) -> Result<Endpoint, ConfigError> {
    let (listener_name, address) = match text.split_once("://") {
        Some((name, address)) => (Some(name.trim().to_ascii_uppercase()), address),
        None => (None, text),
    };
    let (host, port) = address
        .trim()
        .rsplit_once(':')
        .ok_or_else(|| invalid(format!("'{text}' is not HOST:PORT")))?;
    let port = port
        .parse::<u16>()
        .map_err(|_| invalid(format!("'{text}' has no valid port")))?;
    let host = host
        .trim_start_matches('[')
        .trim_end_matches(']')
        .to_string();
    Ok(Endpoint {
        listener_name,
        host,
        port,
    })
}

/// `HOST:PORT` (as `parse_bind_address` writes it) into host and port.
fn split_host_port(address: &str) -> (&str, &str) {
    address.rsplit_once(':').unwrap_or((address, ""))
}

/// A plain `HOST:PORT` to bind (no listener name), in the form `bind` takes.
pub(super) fn parse_bind_address(text: &str) -> Result<String, ConfigError> {
    match parse_endpoint(text)? {
        Endpoint {
            listener_name: Some(_),
            ..
        } => Err(invalid(format!("'{text}' takes no listener name"))),
        Endpoint { host, port, .. } if host.contains(':') => Ok(format!("[{host}]:{port}")),
        Endpoint { host, port, .. } => Ok(format!("{host}:{port}")),
    }
}

/// Where a local client reaches the first of `listen`'s listeners: its address,
/// with a wildcard host (`0.0.0.0`, `::`) replaced by loopback. What
/// `sluice healthcheck` connects to when given no address.
pub fn local_address_of_first_listener(listen: &[String]) -> Result<String, ConfigError> {
    let first = listen
        .first()
        .ok_or_else(|| invalid("at least one listener is required"))?;
    let Endpoint { host, port, .. } = parse_endpoint(first)?;
    Ok(match host.as_str() {
        "" | "0.0.0.0" => format!("127.0.0.1:{port}"),
        "::" => format!("[::1]:{port}"),
        host if host.contains(':') => format!("[{host}]:{port}"),
        host => format!("{host}:{port}"),
    })
}

pub(super) fn parse_listeners(
    listen: &[String],
    advertise: &[String],
) -> Result<Vec<ListenerConfig>, ConfigError> {
    if listen.is_empty() {
        return Err(invalid("at least one listener is required"));
    }
    let mut listeners = Vec::with_capacity(listen.len());
    for (position, entry) in listen.iter().enumerate() {
        let Endpoint {
            listener_name: name,
            host,
            port,
        } = parse_endpoint(entry)?;
        // A listener is of the protocol it is named after; any other is
        // PLAINTEXT unless the protocol map says otherwise.
        let protocol = match &name {
            Some(name) => SecurityProtocol::parse(name),
            None => Some(SecurityProtocol::Plaintext),
        };
        let name = name.unwrap_or_else(|| {
            if position == 0 {
                DEFAULT_LISTENER_NAME.to_string()
            } else {
                format!("{DEFAULT_LISTENER_NAME}{position}")
            }
        });
        if listeners.iter().any(|l: &ListenerConfig| l.name == name) {
            return Err(invalid(format!("listener name {name} used twice")));
        }
        let bind = if host.contains(':') {
            format!("[{host}]:{port}")
        } else {
            format!("{host}:{port}")
        };
        listeners.push(ListenerConfig {
            name,
            bind,
            advertised: None,
            protocol: protocol.unwrap_or(SecurityProtocol::Plaintext),
        });
    }
    for (position, entry) in advertise.iter().enumerate() {
        let Endpoint {
            listener_name: name,
            host,
            port,
        } = parse_endpoint(entry)?;
        let listener = match name {
            Some(name) => listeners.iter_mut().find(|l| l.name == name),
            None => listeners.get_mut(position),
        }
        .ok_or_else(|| invalid(format!("advertised address '{entry}' matches no listener")))?;
        listener.advertised = Some((host, port));
    }
    Ok(listeners)
}
