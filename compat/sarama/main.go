// Command sarama-compat drives one scenario of sarama (Debian's 1.22) against a
// broker at one of sarama's protocol versions, and exits non-zero with a message
// saying what differed on any failure.
//
// Usage: sarama-compat BROKER VERSION SCENARIO
//
// VERSION is a sarama Version name (V0_10_2_0, V1_0_0_0, V2_1_0_0). Scenarios:
//
//	admin            metadata, CreateTopics, DescribeConfigs, DeleteTopics
//	offsets          ListOffsets by newest, oldest and time (v1 through the
//	                 client, v0 through a raw request)
//	commits          OffsetManager commits and resumes (no fetch), and a raw
//	                 OffsetCommit v0 / OffsetFetch v0 round trip
//	group            a ConsumerGroup consumes, commits, closes, and a new one
//	                 resumes at the committed offset (V1_0_0_0 and later)
//	produce-consume  SyncProducer (every codec) and a partition consumer
//	                 reading back exactly what was produced (V1_0_0_0 and later)
//	produce-refused  the broker closes a connection that produces with Produce v2
//	                 or fetches with Fetch v3 (message format v1), so the
//	                 client fails instead of hanging (V0_10_2_0)
//
// Every topic and group name includes the version and the scenario, so that all
// of them can run against one broker. Nothing is randomized.
package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log"
	"os"
	"reflect"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/Shopify/sarama"
)

// The whole scenario must finish within this, or the program fails.
const scenarioDeadline = 60 * time.Second

// How long a step waits for the broker before failing.
const stepWait = 20 * time.Second

var versions = map[string]sarama.KafkaVersion{
	"V0_10_2_0": sarama.V0_10_2_0,
	"V1_0_0_0":  sarama.V1_0_0_0,
	"V2_1_0_0":  sarama.V2_1_0_0,
}

// failure is what check and must panic with; main reports it.
type failure struct{ message string }

func failf(format string, args ...interface{}) {
	panic(failure{fmt.Sprintf(format, args...)})
}

func must(err error, what string) {
	if err != nil {
		failf("%s: %v", what, err)
	}
}

// syncBuffer collects sarama's log, printed only when the scenario fails.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

type env struct {
	broker      string
	versionName string
	version     sarama.KafkaVersion
	scenario    string
}

func (e *env) name(suffix string) string {
	return strings.ToLower(fmt.Sprintf("sarama-%s-%s-%s", e.versionName, e.scenario, suffix))
}

// config is sarama's defaults at the version under test, with bounded waits and
// the settings the scenarios read results through.
func (e *env) config() *sarama.Config {
	c := sarama.NewConfig()
	c.Version = e.version
	c.ClientID = "sluice-sarama-compat"
	c.Net.DialTimeout = stepWait
	c.Net.ReadTimeout = stepWait
	c.Net.WriteTimeout = stepWait
	c.Metadata.Retry.Max = 5
	c.Metadata.Retry.Backoff = 100 * time.Millisecond
	c.Producer.Return.Successes = true
	c.Producer.RequiredAcks = sarama.WaitForAll
	c.Producer.Partitioner = sarama.NewManualPartitioner
	c.Consumer.Return.Errors = true
	c.Consumer.Offsets.Initial = sarama.OffsetOldest
	c.Consumer.Offsets.CommitInterval = 100 * time.Millisecond
	c.Admin.Timeout = stepWait
	return c
}

func (e *env) client() sarama.Client {
	client, err := sarama.NewClient([]string{e.broker}, e.config())
	must(err, "new client")
	return client
}

func (e *env) admin() sarama.ClusterAdmin {
	admin, err := sarama.NewClusterAdmin([]string{e.broker}, e.config())
	must(err, "new cluster admin")
	return admin
}

func (e *env) createTopic(topic string, partitions int32, configs map[string]*string) {
	admin := e.admin()
	defer admin.Close()
	err := admin.CreateTopic(topic, &sarama.TopicDetail{
		NumPartitions:     partitions,
		ReplicationFactor: 1,
		ConfigEntries:     configs,
	}, false)
	must(err, "create topic "+topic)
}

type record struct {
	offset     int64
	key, value string
	headers    string
}

func (r record) String() string {
	return fmt.Sprintf("%d:%q=%q%s", r.offset, r.key, r.value, r.headers)
}

func headerText(headers []*sarama.RecordHeader) string {
	var parts []string
	for _, h := range headers {
		parts = append(parts, fmt.Sprintf("%s=%s", h.Key, h.Value))
	}
	if len(parts) == 0 {
		return ""
	}
	return " [" + strings.Join(parts, ",") + "]"
}

// produce sends each message alone (one batch each) to partition 0 with a
// producer of version `version`, and checks the offsets it was given.
func (e *env) produce(version sarama.KafkaVersion, codec sarama.CompressionCodec, topic string, messages []*sarama.ProducerMessage, firstOffset int64) {
	config := e.config()
	config.Version = version
	config.Producer.Compression = codec
	producer, err := sarama.NewSyncProducer([]string{e.broker}, config)
	must(err, "new sync producer")
	defer producer.Close()
	for i, m := range messages {
		m.Topic = topic
		m.Partition = 0
		partition, offset, err := producer.SendMessage(m)
		must(err, fmt.Sprintf("send message %d (%s)", i, codec))
		if partition != 0 || offset != firstOffset+int64(i) {
			failf("message %d (%s) written at %d/%d, expected 0/%d", i, codec, partition, offset, firstOffset+int64(i))
		}
	}
}

func keyed(n, from int, withHeaders bool) []*sarama.ProducerMessage {
	var messages []*sarama.ProducerMessage
	for i := from; i < from+n; i++ {
		m := &sarama.ProducerMessage{
			Key:   sarama.StringEncoder(fmt.Sprintf("key-%d", i)),
			Value: sarama.StringEncoder(fmt.Sprintf("value-%d", i)),
		}
		if withHeaders {
			m.Headers = []sarama.RecordHeader{{Key: []byte("n"), Value: []byte(fmt.Sprint(i))}}
		}
		messages = append(messages, m)
	}
	return messages
}

func expectedRecords(n, from int, withHeaders bool) []record {
	var records []record
	for i := from; i < from+n; i++ {
		r := record{offset: int64(i), key: fmt.Sprintf("key-%d", i), value: fmt.Sprintf("value-%d", i)}
		if withHeaders {
			r.headers = fmt.Sprintf(" [n=%d]", i)
		}
		records = append(records, r)
	}
	return records
}

func toRecord(m *sarama.ConsumerMessage) record {
	return record{offset: m.Offset, key: string(m.Key), value: string(m.Value), headers: headerText(m.Headers)}
}

// --- admin -------------------------------------------------------------------

func (e *env) scenarioAdmin() {
	topic := e.name("topic")
	retention := "3600000"
	e.createTopic(topic, 3, map[string]*string{"retention.ms": &retention})

	admin := e.admin()
	defer admin.Close()

	// Creating it again is Kafka's TOPIC_ALREADY_EXISTS.
	err := admin.CreateTopic(topic, &sarama.TopicDetail{NumPartitions: 3, ReplicationFactor: 1}, false)
	var topicErr *sarama.TopicError
	if !errors.As(err, &topicErr) || topicErr.Err != sarama.ErrTopicAlreadyExists {
		failf("creating %s twice: expected TOPIC_ALREADY_EXISTS, got %v", topic, err)
	}

	client := e.client()
	defer client.Close()
	must(client.RefreshMetadata(topic), "metadata for "+topic)
	brokers := client.Brokers()
	if len(brokers) != 1 || brokers[0].Addr() != e.broker || brokers[0].ID() != 1 {
		var seen []string
		for _, b := range brokers {
			seen = append(seen, fmt.Sprintf("%d@%s", b.ID(), b.Addr()))
		}
		failf("brokers: expected [1@%s], got %v", e.broker, seen)
	}
	controller, err := client.Controller()
	must(err, "controller")
	if controller.ID() != 1 {
		failf("controller: expected broker 1, got %d", controller.ID())
	}
	partitions, err := client.Partitions(topic)
	must(err, "partitions of "+topic)
	if !reflect.DeepEqual(partitions, []int32{0, 1, 2}) {
		failf("partitions of %s: expected [0 1 2], got %v", topic, partitions)
	}
	for _, p := range partitions {
		leader, err := client.Leader(topic, p)
		must(err, fmt.Sprintf("leader of %s/%d", topic, p))
		if leader.ID() != 1 || leader.Addr() != e.broker {
			failf("leader of %s/%d: expected 1@%s, got %d@%s", topic, p, e.broker, leader.ID(), leader.Addr())
		}
		replicas, err := client.Replicas(topic, p)
		must(err, "replicas")
		if !reflect.DeepEqual(replicas, []int32{1}) {
			failf("replicas of %s/%d: expected [1], got %v", topic, p, replicas)
		}
	}
	topics, err := client.Topics()
	must(err, "topics")
	if !contains(topics, topic) {
		failf("topics %v lack %s", topics, topic)
	}

	e.describeConfigs(admin, topic, retention)

	must(admin.DeleteTopic(topic), "delete topic "+topic)
	// A metadata request for every topic (which creates none) no longer lists it.
	deadline := time.Now().Add(stepWait)
	for {
		must(client.RefreshMetadata(), "metadata for all topics")
		topics, err = client.Topics()
		must(err, "topics")
		if !contains(topics, topic) {
			break
		}
		if time.Now().After(deadline) {
			failf("%s still listed after DeleteTopics: %v", topic, topics)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// describeConfigs checks DescribeConfigs v0 (the only version sarama 1.22 sends).
func (e *env) describeConfigs(admin sarama.ClusterAdmin, topic, retention string) {
	resource := sarama.ConfigResource{Type: sarama.TopicResource, Name: topic}
	if !e.version.IsAtLeast(sarama.V0_11_0_0) {
		// Kafka 0.10.2 had no DescribeConfigs: sarama refuses it itself, and
		// nothing reaches the broker.
		if _, err := admin.DescribeConfig(resource); err != sarama.ErrUnsupportedVersion {
			failf("DescribeConfig at %s: expected sarama's own ErrUnsupportedVersion, got %v", e.versionName, err)
		}
		return
	}
	entries, err := admin.DescribeConfig(resource)
	must(err, "describe configs of "+topic)
	byName := map[string]sarama.ConfigEntry{}
	for _, entry := range entries {
		byName[entry.Name] = entry
	}
	checkEntry := func(name, value string, isDefault bool) {
		entry, ok := byName[name]
		if !ok {
			failf("describe configs of %s: no %s among %d entries", topic, name, len(entries))
		}
		if entry.Value != value || entry.Default != isDefault || entry.Sensitive {
			failf("describe configs of %s: %s = %q (default %v, sensitive %v), expected %q (default %v)",
				topic, name, entry.Value, entry.Default, entry.Sensitive, value, isDefault)
		}
	}
	checkEntry("cleanup.policy", "delete", true)
	checkEntry("retention.ms", retention, false)
	checkEntry("max.message.bytes", "1048588", true)

	// Only the names asked for.
	only, err := admin.DescribeConfig(sarama.ConfigResource{
		Type: sarama.TopicResource, Name: topic, ConfigNames: []string{"retention.ms"},
	})
	must(err, "describe one config of "+topic)
	if len(only) != 1 || only[0].Name != "retention.ms" || only[0].Value != retention {
		failf("describe retention.ms of %s: got %+v", topic, only)
	}
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// --- offsets -----------------------------------------------------------------

func (e *env) scenarioOffsets() {
	topic := e.name("topic")
	e.createTopic(topic, 1, nil)

	// Three records, one batch each, an hour ago and a second apart. sarama at
	// V0_10_2_0 cannot produce to this broker (see produce-refused), so there a
	// V1_0_0_0 producer writes them and the old client only reads offsets.
	producerVersion := e.version
	if !producerVersion.IsAtLeast(sarama.V0_11_0_0) {
		producerVersion = sarama.V1_0_0_0
	}
	base := time.Now().Add(-time.Hour).Truncate(time.Millisecond)
	messages := keyed(3, 0, false)
	for i, m := range messages {
		m.Timestamp = base.Add(time.Duration(i) * time.Second)
	}
	e.produce(producerVersion, sarama.CompressionNone, topic, messages, 0)

	client := e.client()
	defer client.Close()

	// ListOffsets v0, whatever the client's version: the old-style offsets list.
	leader, err := client.Leader(topic, 0)
	must(err, "leader")
	for _, c := range []struct {
		what string
		time int64
		want int64
	}{{"newest", sarama.OffsetNewest, 3}, {"oldest", sarama.OffsetOldest, 0}} {
		request := &sarama.OffsetRequest{Version: 0}
		request.AddBlock(topic, 0, c.time, 1)
		response, err := leader.GetAvailableOffsets(request)
		must(err, "ListOffsets v0 "+c.what)
		block := response.GetBlock(topic, 0)
		if block == nil || block.Err != sarama.ErrNoError || !reflect.DeepEqual(block.Offsets, []int64{c.want}) {
			failf("ListOffsets v0 %s: expected offsets [%d], got %+v", c.what, c.want, block)
		}
	}

	// By time, through the client (ListOffsets v1): the first offset whose
	// timestamp is at or after the one asked for.
	ms := func(t time.Time) int64 { return t.UnixNano() / int64(time.Millisecond) }
	cases := []struct {
		what string
		time int64
		want int64
	}{
		{"newest", sarama.OffsetNewest, 3},
		{"oldest", sarama.OffsetOldest, 0},
		{"before the first record", ms(base.Add(-time.Minute)), 0},
		{"the first record's timestamp", ms(base), 0},
		{"between the first and second", ms(base.Add(500 * time.Millisecond)), 1},
		{"the second record's timestamp", ms(base.Add(time.Second)), 1},
		{"the third record's timestamp", ms(base.Add(2 * time.Second)), 2},
		// No record at or after it: Kafka's "no offset", -1.
		{"after the last record", ms(base.Add(time.Minute)), -1},
	}
	var wrong []string
	for _, c := range cases {
		got, err := client.GetOffset(topic, 0, c.time)
		must(err, "offset for "+c.what)
		if got != c.want {
			wrong = append(wrong, fmt.Sprintf("%s (%d): got %d, expected %d", c.what, c.time, got, c.want))
		}
	}
	if len(wrong) > 0 {
		failf("ListOffsets v%d: %s", listOffsetsVersion(e.version), strings.Join(wrong, "; "))
	}
}

func listOffsetsVersion(v sarama.KafkaVersion) int {
	if v.IsAtLeast(sarama.V0_10_1_0) {
		return 1
	}
	return 0
}

// --- commits -----------------------------------------------------------------

// managedOffset opens a client and an offset manager for (group, topic/0) and
// returns what it resumes from, with the managers to close.
func (e *env) openOffsetManager(group, topic string) (sarama.Client, sarama.OffsetManager, sarama.PartitionOffsetManager) {
	client := e.client()
	manager, err := sarama.NewOffsetManagerFromClient(group, client)
	must(err, "new offset manager")
	pom, err := manager.ManagePartition(topic, 0)
	must(err, "manage partition")
	return client, manager, pom
}

func closeOffsetManager(client sarama.Client, manager sarama.OffsetManager, pom sarama.PartitionOffsetManager) {
	// The partition manager's last commit happens here; its errors come back.
	must(pom.Close(), "commit on close")
	must(manager.Close(), "close offset manager")
	must(client.Close(), "close client")
}

func (e *env) scenarioCommits() {
	topic := e.name("topic")
	group := e.name("group")
	e.createTopic(topic, 1, nil)

	client, manager, pom := e.openOffsetManager(group, topic)
	if offset, metadata := pom.NextOffset(); offset != sarama.OffsetOldest || metadata != "" {
		failf("a new group resumes at %d %q, expected the initial offset %d", offset, metadata, sarama.OffsetOldest)
	}
	pom.MarkOffset(7, "seven")
	closeOffsetManager(client, manager, pom)

	client, manager, pom = e.openOffsetManager(group, topic)
	if offset, metadata := pom.NextOffset(); offset != 7 || metadata != "seven" {
		failf("resumed at %d %q after committing 7 \"seven\"", offset, metadata)
	}
	// Back to an earlier offset.
	pom.ResetOffset(3, "three")
	closeOffsetManager(client, manager, pom)

	client, manager, pom = e.openOffsetManager(group, topic)
	if offset, metadata := pom.NextOffset(); offset != 3 || metadata != "three" {
		failf("resumed at %d %q after resetting to 3 \"three\"", offset, metadata)
	}
	closeOffsetManager(client, manager, pom)

	// OffsetCommit v0 and OffsetFetch v0, raw, on the group's coordinator.
	client = e.client()
	defer client.Close()
	coordinator, err := client.Coordinator(group)
	must(err, "coordinator of "+group)
	commit := &sarama.OffsetCommitRequest{Version: 0, ConsumerGroup: group}
	commit.AddBlock(topic, 0, 11, 0, "eleven")
	committed, err := coordinator.CommitOffset(commit)
	must(err, "OffsetCommit v0")
	if code := committed.Errors[topic][0]; code != sarama.ErrNoError {
		failf("OffsetCommit v0: %v", code)
	}
	fetch := &sarama.OffsetFetchRequest{Version: 0, ConsumerGroup: group}
	fetch.AddPartition(topic, 0)
	fetched, err := coordinator.FetchOffset(fetch)
	must(err, "OffsetFetch v0")
	block := fetched.GetBlock(topic, 0)
	if block == nil || block.Err != sarama.ErrNoError || block.Offset != 11 || block.Metadata != "eleven" {
		failf("OffsetFetch v0 after committing 11 \"eleven\": got %+v", block)
	}
}

// --- group -------------------------------------------------------------------

// groupHandler consumes partition 0 until `stop` records have been seen in
// this session, marking each, then cancels the session.
type groupHandler struct {
	stop    int
	cancel  context.CancelFunc
	mu      sync.Mutex
	records []record
}

func (h *groupHandler) Setup(sarama.ConsumerGroupSession) error   { return nil }
func (h *groupHandler) Cleanup(sarama.ConsumerGroupSession) error { return nil }

func (h *groupHandler) ConsumeClaim(session sarama.ConsumerGroupSession, claim sarama.ConsumerGroupClaim) error {
	for message := range claim.Messages() {
		h.mu.Lock()
		h.records = append(h.records, toRecord(message))
		done := len(h.records) >= h.stop
		h.mu.Unlock()
		session.MarkMessage(message, "")
		if done {
			h.cancel()
			return nil
		}
	}
	return nil
}

// consumeInGroup joins `group`, consumes `stop` records and leaves.
func (e *env) consumeInGroup(group, topic string, stop int) []record {
	consumerGroup, err := sarama.NewConsumerGroup([]string{e.broker}, group, e.config())
	must(err, "new consumer group")
	ctx, cancel := context.WithTimeout(context.Background(), stepWait)
	defer cancel()
	handler := &groupHandler{stop: stop, cancel: cancel}
	errs := make(chan error, 1)
	go func() {
		for err := range consumerGroup.Errors() {
			select {
			case errs <- err:
			default:
			}
		}
	}()
	for ctx.Err() == nil {
		if err := consumerGroup.Consume(ctx, []string{topic}, handler); err != nil {
			failf("consume in group %s: %v", group, err)
		}
	}
	must(consumerGroup.Close(), "close consumer group")
	select {
	case err := <-errs:
		failf("consumer group %s: %v", group, err)
	default:
	}
	handler.mu.Lock()
	defer handler.mu.Unlock()
	if len(handler.records) < stop {
		failf("group %s: consumed %d of %d records before the deadline: %v", group, len(handler.records), stop, handler.records)
	}
	return handler.records
}

func (e *env) committedOffset(group, topic string) int64 {
	client := e.client()
	defer client.Close()
	coordinator, err := client.Coordinator(group)
	must(err, "coordinator of "+group)
	request := &sarama.OffsetFetchRequest{Version: 1, ConsumerGroup: group}
	request.AddPartition(topic, 0)
	response, err := coordinator.FetchOffset(request)
	must(err, "OffsetFetch v1")
	block := response.GetBlock(topic, 0)
	if block == nil || block.Err != sarama.ErrNoError {
		failf("OffsetFetch v1 for %s: %+v", group, block)
	}
	return block.Offset
}

func (e *env) scenarioGroup() {
	if !e.version.IsAtLeast(sarama.V0_11_0_0) {
		failf("the group scenario fetches, which needs Fetch v4 (V0_11_0_0 or later)")
	}
	topic := e.name("topic")
	group := e.name("group")
	e.createTopic(topic, 1, nil)
	e.produce(e.version, sarama.CompressionNone, topic, keyed(10, 0, true), 0)

	first := e.consumeInGroup(group, topic, 4)
	if want := expectedRecords(4, 0, true); !reflect.DeepEqual(first, want) {
		failf("first member consumed %v, expected %v", first, want)
	}
	if offset := e.committedOffset(group, topic); offset != 4 {
		failf("committed offset after consuming offsets 0-3: %d, expected 4", offset)
	}

	second := e.consumeInGroup(group, topic, 6)
	if want := expectedRecords(6, 4, true); !reflect.DeepEqual(second, want) {
		failf("second member (resuming) consumed %v, expected %v", second, want)
	}
	if offset := e.committedOffset(group, topic); offset != 10 {
		failf("committed offset after consuming offsets 4-9: %d, expected 10", offset)
	}
}

// --- produce-consume ---------------------------------------------------------

func (e *env) scenarioProduceConsume() {
	if !e.version.IsAtLeast(sarama.V0_11_0_0) {
		failf("produce-consume needs Produce v3 and Fetch v4 (V0_11_0_0 or later)")
	}
	topic := e.name("topic")
	e.createTopic(topic, 1, nil)
	codecs := []sarama.CompressionCodec{
		sarama.CompressionNone, sarama.CompressionGZIP, sarama.CompressionSnappy, sarama.CompressionLZ4,
	}
	const per = 25
	for i, codec := range codecs {
		e.produce(e.version, codec, topic, keyed(per, i*per, true), int64(i*per))
	}
	total := per * len(codecs)

	// Also a batch of many records: an async-style burst through SendMessages.
	config := e.config()
	producer, err := sarama.NewSyncProducer([]string{e.broker}, config)
	must(err, "new sync producer")
	burst := keyed(per, total, true)
	for _, m := range burst {
		m.Topic = topic
	}
	must(producer.SendMessages(burst), "send messages")
	must(producer.Close(), "close producer")
	total += per

	consumer, err := sarama.NewConsumer([]string{e.broker}, e.config())
	must(err, "new consumer")
	defer consumer.Close()
	pc, err := consumer.ConsumePartition(topic, 0, sarama.OffsetOldest)
	must(err, "consume partition")
	defer pc.Close()
	var got []record
	timeout := time.After(stepWait)
	for len(got) < total {
		select {
		case m := <-pc.Messages():
			got = append(got, toRecord(m))
		case err := <-pc.Errors():
			failf("partition consumer: %v", err)
		case <-timeout:
			failf("consumed %d of %d records before the deadline", len(got), total)
		}
	}
	if want := expectedRecords(total, 0, true); !reflect.DeepEqual(got, want) {
		failf("consumed records differ from those produced:\n got  %v\n want %v", got, want)
	}
	if hw := pc.HighWaterMarkOffset(); hw != int64(total) {
		failf("high watermark %d, expected %d", hw, total)
	}
}

// --- produce-refused ---------------------------------------------------------

func (e *env) scenarioProduceRefused() {
	if e.version.IsAtLeast(sarama.V0_11_0_0) {
		failf("produce-refused is for versions that produce with message format v1 (before V0_11_0_0)")
	}
	topic := e.name("topic")
	e.createTopic(topic, 1, nil)

	config := e.config()
	config.Producer.Retry.Max = 1
	config.Producer.Retry.Backoff = 50 * time.Millisecond
	producer, err := sarama.NewSyncProducer([]string{e.broker}, config)
	must(err, "new sync producer")
	started := time.Now()
	_, _, err = producer.SendMessage(&sarama.ProducerMessage{
		Topic: topic, Partition: 0, Value: sarama.StringEncoder("refused"),
	})
	if err == nil {
		failf("Produce v2 (message format v1) was accepted; the broker serves Produce from v3 only")
	}
	if elapsed := time.Since(started); elapsed > stepWait/2 {
		failf("Produce v2 failed only after %v: the connection was not closed at once (%v)", elapsed, err)
	}
	fmt.Printf("produce at %s failed as expected: %v\n", e.versionName, err)
	_ = producer.Close()

	// Nothing was written.
	client := e.client()
	defer client.Close()
	newest, err := client.GetOffset(topic, 0, sarama.OffsetNewest)
	must(err, "newest offset")
	if newest != 0 {
		failf("the refused produce left the log end at %d", newest)
	}

	// A record written by a V1_0_0_0 producer, then read with Fetch v3: the
	// consumer reports an error and never delivers the record.
	e.produce(sarama.V1_0_0_0, sarama.CompressionNone, topic, keyed(1, 0, false), 0)
	consumer, err := sarama.NewConsumer([]string{e.broker}, e.config())
	must(err, "new consumer")
	defer consumer.Close()
	pc, err := consumer.ConsumePartition(topic, 0, sarama.OffsetOldest)
	must(err, "consume partition")
	defer pc.AsyncClose()
	select {
	case m := <-pc.Messages():
		failf("Fetch v3 (message format v1) delivered %v; the broker serves Fetch from v4 only", toRecord(m))
	case err := <-pc.Errors():
		fmt.Printf("fetch at %s failed as expected: %v\n", e.versionName, err)
	case <-time.After(stepWait):
		failf("Fetch v3 neither failed nor delivered within %v", stepWait)
	}
}

func main() {
	if len(os.Args) != 4 {
		fmt.Fprintln(os.Stderr, "usage: sarama-compat BROKER VERSION SCENARIO")
		os.Exit(2)
	}
	e := &env{broker: os.Args[1], versionName: os.Args[2], scenario: os.Args[3]}
	version, ok := versions[e.versionName]
	if !ok {
		var names []string
		for name := range versions {
			names = append(names, name)
		}
		sort.Strings(names)
		fmt.Fprintf(os.Stderr, "unknown version %s (one of %v)\n", e.versionName, names)
		os.Exit(2)
	}
	e.version = version
	scenarios := map[string]func(){
		"admin":           e.scenarioAdmin,
		"offsets":         e.scenarioOffsets,
		"commits":         e.scenarioCommits,
		"group":           e.scenarioGroup,
		"produce-consume": e.scenarioProduceConsume,
		"produce-refused": e.scenarioProduceRefused,
	}
	run, ok := scenarios[e.scenario]
	if !ok {
		fmt.Fprintf(os.Stderr, "unknown scenario %s\n", e.scenario)
		os.Exit(2)
	}

	saramaLog := &syncBuffer{}
	sarama.Logger = log.New(saramaLog, "[sarama] ", log.Ltime|log.Lmicroseconds)
	label := fmt.Sprintf("sarama %s %s", e.versionName, e.scenario)
	report := func(message string) {
		fmt.Fprintf(os.Stderr, "FAIL %s: %s\n--- sarama log ---\n%s", label, message, saramaLog.String())
		os.Exit(1)
	}
	timer := time.AfterFunc(scenarioDeadline, func() {
		report(fmt.Sprintf("not finished within %v", scenarioDeadline))
	})
	defer timer.Stop()
	defer func() {
		if r := recover(); r != nil {
			if f, ok := r.(failure); ok {
				report(f.message)
			}
			report(fmt.Sprint(r))
		}
	}()
	started := time.Now()
	run()
	fmt.Printf("ok %s (%.1fs)\n", label, time.Since(started).Seconds())
}
