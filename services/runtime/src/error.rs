//! The runtime's error type. Classified as the style guide asks: configuration errors stop a
//! service at start-up; Kafka errors are external (retried where a retry helps).

#[derive(Debug, thiserror::Error)]
pub enum RuntimeError {
    #[error("configuration: {0}")]
    Config(String),
    #[error("kafka: {context}: {source}")]
    Kafka {
        context: String,
        #[source]
        source: rdkafka::error::KafkaError,
    },
    #[error("embedded broker: {0}")]
    Broker(String),
    #[error("admin server: {0}")]
    Admin(String),
    #[error("encoding: {0}")]
    Encode(#[from] octant_contracts::EncodeError),
}

impl RuntimeError {
    pub fn kafka(context: impl Into<String>, source: rdkafka::error::KafkaError) -> Self {
        RuntimeError::Kafka { context: context.into(), source }
    }
}
